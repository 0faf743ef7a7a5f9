package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
)

// EngineMutator is the Mutator that runs the engine's mutate rules
// (PolicySet.Mutate). Mutate-existing rules are left to the background
// controller, as in Kyverno: admission only patches the request's object.
type EngineMutator struct {
	// Loaders resolve context entries and namespace labels.
	Loaders loader.Loaders
	// Observe, when set, sees every evaluation's rule responses and how
	// long it took, before the answer is built: the metrics of mutate
	// rules hang here, so they never change what is answered.
	Observe func(req *engine.Request, resp *engine.MutateResponse, elapsed time.Duration)
}

var _ Mutator = EngineMutator{}

// Mutate runs set's mutate rules against req and returns the JSON patch
// from the request's object to the mutated one.
//
// A rule that errors under failurePolicy Fail (failClosed) denies the
// request with Kyverno's text (admission-reports.md §1.4); otherwise the
// error becomes a warning and the request is admitted with the patches of
// the rules that did apply.
func (m EngineMutator) Mutate(ctx context.Context, set *engine.PolicySet, req *engine.Request, failClosed bool) (MutationResult, error) {
	var start time.Time
	if m.Observe != nil {
		start = time.Now()
	}
	resp := set.Mutate(ctx, req, engine.WithLoaders(m.Loaders), engine.WithImageDigestPins(), engine.WithWebhookConditionsMet())
	if m.Observe != nil {
		m.Observe(req, resp, time.Since(start))
	}
	if msg := imageDenial(resp, failClosed); msg != "" {
		return MutationResult{Denial: msg}, nil
	}
	if failClosed {
		if msg := mutationDenial(resp); msg != "" {
			return MutationResult{Denial: msg}, nil
		}
	}
	patch, err := resp.JSONPatch()
	if err != nil {
		return MutationResult{}, fmt.Errorf("encoding the patch of %s: %w", resp.Resource, err)
	}
	out := MutationResult{Patch: patch, Warnings: mutationWarnings(resp)}
	if len(patch) > 0 {
		out.Object = resp.Object
	}
	return out, nil
}

// imageDenial is the denial of the verifyImages rules that block: a fail
// whose action is Enforce, or an error under failurePolicy Fail. It reads
// as a validating denial does (verify-images.md §2.11):
//
//	resource Pod/ns/name was blocked due to the following policies …
//
// or "" when none blocks.
func imageDenial(resp *engine.MutateResponse, failClosed bool) string {
	blocking := &engine.Response{Resource: resp.Resource}
	for _, p := range resp.Policies {
		var rules []engine.RuleResponse
		for _, r := range p.Rules {
			if r.Type == engine.TypeImageVerify && r.Action == engine.Enforce &&
				(r.Status == engine.StatusFail || (r.Status == engine.StatusError && failClosed)) {
				rules = append(rules, r)
			}
		}
		if len(rules) > 0 {
			blocking.Policies = append(blocking.Policies, engine.PolicyResponse{Policy: p.Policy, Key: p.Key, Rules: rules})
		}
	}
	if len(blocking.Policies) == 0 {
		return ""
	}
	return blockedMessage([]*engine.Response{blocking})
}

// mutationDenial is the denial of the first policy with an erroring rule,
// in Kyverno's words:
//
//	mutation policy <p> error: failed to apply policy <p> rules [<rule>: <msg> <rule2>: <msg2>]
//
// or "" when no rule errored.
//
// A MutatingPolicy's error reads as in Kyverno's mpol handler:
//
//	Resource: <ns>/<name>, Kind: <kind>, Errors: [Policy <p>: <msg>]
func mutationDenial(resp *engine.MutateResponse) string {
	for _, p := range resp.Policies {
		if _, ok := p.Policy.(policiesv1.MutatingPolicyLike); ok {
			for _, r := range p.Rules {
				if r.Status == engine.StatusError {
					return fmt.Sprintf("Resource: %s/%s, Kind: %s, Errors: [Policy %s: %s]", resp.Resource.Namespace, resp.Resource.Name, resp.Resource.Kind, p.Policy.GetName(), r.Message)
				}
			}
			continue
		}
		var failed []string
		for _, r := range p.Rules {
			if r.Status == engine.StatusError {
				failed = append(failed, r.Name+": "+r.Message)
			}
		}
		if len(failed) > 0 {
			name := p.Policy.GetName()
			return fmt.Sprintf("mutation policy %s error: failed to apply policy %s rules [%s]", name, name, strings.Join(failed, " "))
		}
	}
	return ""
}

// mutationWarnings lists "policy <p>.<rule>: <message>" for every rule that
// failed or errored, and for every rule that applied in a policy with
// spec.emitWarning (admission-reports.md §1.5).
func mutationWarnings(resp *engine.MutateResponse) []string {
	var out []string
	for _, p := range resp.Policies {
		emit := p.Policy.GetSpec().GetEmitWarning()
		_, mpol := p.Policy.(policiesv1.MutatingPolicyLike)
		for _, r := range p.Rules {
			label := "policy " + p.Policy.GetName() + "." + r.Name
			if mpol {
				// Kyverno's words for a MutatingPolicy's error let through.
				label = "Policy " + p.Policy.GetName()
			}
			for _, w := range r.Warnings {
				out = append(out, label+": "+w)
			}
			switch {
			case r.Status == engine.StatusSkip && len(r.Warnings) > 0:
				continue
			case r.Status == engine.StatusFail, r.Status == engine.StatusError, r.Status == engine.StatusWarn:
			case emit && r.Status != engine.StatusSkip:
			default:
				continue
			}
			out = append(out, label+": "+r.Message)
		}
	}
	return out
}
