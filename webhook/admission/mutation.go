package admission

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/server"
)

// meteredMutator is server.EngineMutator that also records the mutate
// rules' results and execution time (kyverno_policy_results_total and
// kyverno_policy_execution_duration_seconds with rule_type="mutate").
//
// The server's Mutator interface hands back only the patch, warnings and
// denial, not the rule responses the metrics need, so this mutator runs
// the engine itself and turns its response into the same MutationResult
// EngineMutator would: TestMeteredMutatorAnswersAsEngineMutator holds the
// two to the same answers. Once the server exposes the responses (or a
// hook on them), this type reduces to the recording.
type meteredMutator struct {
	loaders engine.Loaders
	metrics *metrics.Recorder
}

var _ server.Mutator = meteredMutator{}

func (m meteredMutator) Mutate(ctx context.Context, set *engine.PolicySet, req *engine.Request, failClosed bool) (server.MutationResult, error) {
	start := time.Now()
	resp := set.Mutate(ctx, req, engine.WithLoaders(m.loaders))
	m.metrics.ObserveMutation(mutationRequest(req), resp, time.Since(start))
	return mutationResult(resp, failClosed)
}

// mutationRequest labels a mutation's samples. resource_kind is the kind
// of the object evaluated, as Kyverno's engine labels it: the
// subresource's kind (Scale, PodExecOptions) on subresource requests.
func mutationRequest(req *engine.Request) metrics.Request {
	kind := req.Kind.Kind
	if k, ok := req.Object["kind"].(string); ok && k != "" {
		kind = k
	}
	op := string(req.Operation)
	if op == "" {
		op = "CREATE"
	}
	return metrics.Request{Kind: kind, Namespace: req.Namespace, Operation: op, Webhook: metrics.Mutating, DryRun: req.DryRun}
}

// mutationResult is what server.EngineMutator answers for resp: under
// failurePolicy Fail the first policy with an erroring rule denies the
// request in Kyverno's words (admission-reports.md §1.4); otherwise the
// patch goes out with a warning per failed, erroring or warning rule, and
// per applied rule of a policy with spec.emitWarning (§1.5).
func mutationResult(resp *engine.MutateResponse, failClosed bool) (server.MutationResult, error) {
	if failClosed {
		if msg := mutationDenial(resp); msg != "" {
			return server.MutationResult{Denial: msg}, nil
		}
	}
	patch, err := resp.JSONPatch()
	if err != nil {
		return server.MutationResult{}, fmt.Errorf("encoding the patch of %s: %w", resp.Resource, err)
	}
	out := server.MutationResult{Patch: patch, Warnings: mutationWarnings(resp)}
	if len(patch) > 0 {
		out.Object = resp.Object
	}
	return out, nil
}

// mutationDenial is
//
//	mutation policy <p> error: failed to apply policy <p> rules [<rule>: <msg> <rule2>: <msg2>]
//
// for the first policy with an erroring rule, or "" when none errored.
func mutationDenial(resp *engine.MutateResponse) string {
	for _, p := range resp.Policies {
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

// mutationWarnings lists "policy <p>.<rule>: <message>" for every rule
// that failed, errored or warned, and for every rule that applied in a
// policy with spec.emitWarning.
func mutationWarnings(resp *engine.MutateResponse) []string {
	var out []string
	for _, p := range resp.Policies {
		emit := p.Policy.GetSpec().GetEmitWarning()
		for _, r := range p.Rules {
			switch {
			case r.Status == engine.StatusFail, r.Status == engine.StatusError, r.Status == engine.StatusWarn:
			case emit && r.Status != engine.StatusSkip:
			default:
				continue
			}
			out = append(out, "policy "+p.Policy.GetName()+"."+r.Name+": "+r.Message)
		}
	}
	return out
}
