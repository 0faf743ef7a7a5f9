package cpol

import (
	"context"
	"errors"
	"fmt"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/mutate"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/variables"
)

// The mutate rules of a kyverno.io policy: patches, foreach, the view of
// the patched object (cpolInput).

func anyApplied(rrs []review.RuleResponse) bool {
	for _, rr := range rrs {
		if rr.Status != review.StatusSkip {
			return true
		}
	}
	return false
}

// patchResult is the outcome of applying a mutate rule (or a part of it)
// to an object.
type patchResult struct {
	status  review.RuleStatus
	message string
	// object is the patched object on pass, the input otherwise.
	object map[string]any
}

func patchError(msg string, err error) patchResult {
	return patchResult{status: review.StatusError, message: msg + ": " + err.Error()}
}

// substitutionFailed is Kyverno's error for a variable that could not be
// resolved in a patch: "variable substitution failed: failed to resolve
// <expr> at path <path>: JMESPath query failed: <cause>".
func substitutionFailed(err error) patchResult {
	var ve *variables.Error
	if errors.As(err, &ve) {
		err = fmt.Errorf("failed to resolve %s at path %s: JMESPath query failed: %w", ve.Variable, ve.Path, ve.Err)
	}
	return patchError("variable substitution failed", err)
}

// mutateObject applies the rule's patch or foreach to resource (spec §1.3).
func (ev *evaluation) mutateObject(ctx context.Context, doc *jsoncontext.Document, r *rule, resource map[string]any) patchResult {
	m := r.mutate
	if len(m.foreach) > 0 {
		patched, applied, failed := ev.mutateForeach(ctx, doc, r, m.foreach, resource, 0)
		if failed != nil {
			return *failed
		}
		if applied == 0 {
			return patchResult{status: review.StatusSkip, message: "0 elements processed", object: resource}
		}
		return patchResult{status: review.StatusPass, message: mutatedMessage(patched), object: patched}
	}
	if m.patch == nil {
		return patchResult{status: review.StatusError, message: "rule " + r.name + " has no patch"}
	}
	res := ev.applyPatch(doc, m.patch, resource)
	if res.status == review.StatusPass {
		res.message = mutatedMessage(res.object)
	}
	return res
}

// applyPatch substitutes the variables of one patch and applies it. An
// unchanged result (or a condition anchor that does not hold) is a skip.
func (ev *evaluation) applyPatch(doc *jsoncontext.Document, p *patch, resource map[string]any) patchResult {
	unchanged := patchResult{status: review.StatusSkip, message: "no patches applied", object: resource}
	var out map[string]any
	if p.strategic != nil {
		body := p.strategic
		if p.hasVars {
			var err error
			if body, err = ev.substitute(doc, body, p.path); err != nil {
				return substitutionFailed(err)
			}
		}
		var err error
		out, err = mutate.StrategicMerge(resource, body)
		if err != nil {
			var cond *mutate.ConditionError
			if errors.As(err, &cond) {
				return unchanged
			}
			return patchError("failed to patch resource", err)
		}
	} else {
		decoded := p.decoded
		if decoded == nil {
			text := p.json6902
			if p.hasVars {
				v, err := ev.substitute(doc, text, p.path)
				if err != nil {
					return substitutionFailed(err)
				}
				s, ok := v.(string)
				if !ok {
					return patchResult{status: review.StatusError, message: fmt.Sprintf("failed to patch resource: patchesJson6902 resolved to %s, not text", jsoncontext.KindOf(v))}
				}
				text = s
			}
			var err error
			if decoded, err = mutate.DecodeJSON6902(text); err != nil {
				return patchError("failed to patch resource", err)
			}
		}
		var err error
		if out, err = mutate.ApplyJSON6902(resource, decoded); err != nil {
			return patchError("failed to patch resource", err)
		}
	}
	if mutate.Equal(resource, out) {
		return unchanged
	}
	return patchResult{status: review.StatusPass, object: out}
}

// mutatedMessage is Kyverno's pass message: "mutated Kind/name in
// namespace ns", without the namespace part for cluster-scoped objects.
func mutatedMessage(obj map[string]any) string {
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	if ns == "" {
		return fmt.Sprintf("mutated %s/%s", kind, name)
	}
	return fmt.Sprintf("mutated %s/%s in namespace %s", kind, name, ns)
}

// mutateForeach runs foreach entries in order over resource (spec §4.1).
// Each entry sees request.object as the previous entries left it; it
// returns the patched object, how many entries changed it, and the error
// result that stopped it, if any.
func (ev *evaluation) mutateForeach(ctx context.Context, doc *jsoncontext.Document, r *rule, entries []*foreachMutation, resource map[string]any, nesting int) (map[string]any, int, *patchResult) {
	applied := 0
	for _, fe := range entries {
		elements, err := ev.evalList(doc, fe.list)
		if err != nil {
			res := patchError("failed to evaluate list "+fe.list, err)
			return nil, 0, &res
		}
		patched, changed, failed := ev.mutateElements(ctx, doc, r, fe, elements, resource, nesting)
		if failed != nil {
			res := patchResult{status: review.StatusError, message: "failed to mutate elements: " + failed.message}
			return nil, 0, &res
		}
		if changed {
			resource = patched
			applied++
			doc = doc.Child()
			doc.Set("request.object", resource)
		}
	}
	return resource, applied, nil
}

// mutateElements applies one foreach entry to each element in turn, all on
// the same working copy. request.object stays the snapshot taken when the
// entry started; elementIndex is the element's position in the list even
// when iterating in reverse.
func (ev *evaluation) mutateElements(ctx context.Context, doc *jsoncontext.Document, r *rule, fe *foreachMutation, elements []any, resource map[string]any, nesting int) (map[string]any, bool, *patchResult) {
	patched := resource
	for n := range elements {
		i := n
		if fe.descending() {
			i = len(elements) - 1 - n
		}
		el := elements[i]
		if el == nil {
			continue
		}
		edoc := doc.Child()
		if err := ev.enterElement(ctx, edoc, r, fe.context, el, i, nesting); err != nil {
			res := patchError("failed to load context", err)
			return nil, false, &res
		}
		ok, _, err := ev.conditions(edoc, fe.preconditions)
		if err != nil {
			res := patchError("failed to evaluate preconditions", err)
			return nil, false, &res
		}
		if !ok {
			continue
		}
		if len(fe.nested) > 0 {
			out, applied, failed := ev.mutateForeach(ctx, edoc, r, fe.nested, patched, nesting+1)
			if failed != nil {
				return nil, false, failed
			}
			if applied > 0 {
				patched = out
			}
			continue
		}
		if fe.patch == nil {
			continue
		}
		res := ev.applyPatch(edoc, fe.patch, patched)
		switch res.status {
		case review.StatusError:
			return nil, false, &res
		case review.StatusPass:
			patched = res.object
		}
	}
	return patched, !mutate.Equal(resource, patched), nil
}

// Input is a view of a request as the kyverno.io rules read it: the
// review.View and what the rules share over it (cpolRequest); Next is the
// view of the same request with another object, as the rule after a mutate
// rule sees it. The engine root's view of a request is one.
type Input interface {
	Views() (*review.View, *Request)
	Next(obj map[string]any) Input
}

// Mutate runs the policy's mutate rules over the request (the engine's PolicySet.Mutate):
// their responses and the view of the object they left.
func (cp *Policy) Mutate(ctx context.Context, in Input, env *Env, cfg *review.Options) ([]review.RuleResponse, Input) {
	var rules []review.RuleResponse
	view, st := in.Views()
	var ev *evaluation
	for _, r := range cp.ruleList() {
		if r.typ != review.TypeMutation || r.mutate == nil {
			continue
		}
		existing := len(r.mutate.targets) > 0
		if existing && !cfg.MutateExisting {
			continue
		}
		if !existing && view.Req.Object == nil {
			// Nothing to patch (DELETE).
			continue
		}
		if !r.selects(&view.Res) {
			continue
		}
		if ev == nil || ev.in != view {
			ev = &evaluation{env: env, policy: cp, in: view, st: st, cfg: cfg, object: view.Object}
		}
		rr := review.RuleResponse{Name: r.name, Type: r.typ, Properties: r.src.ReportProperties}
		doc, _, final := ev.prelude(ctx, r, &rr)
		var responses []review.RuleResponse
		switch {
		case final != nil:
			rr.Status, rr.Message = final.Status, final.Message
			responses = append(responses, rr)
		case existing && cfg.BackgroundChecks:
			rr.Status = review.StatusPass
			responses = append(responses, rr)
		case existing:
			responses = ev.mutateTargets(ctx, doc, r, rr)
		default:
			res := ev.mutateObject(ctx, doc, r, view.Object)
			rr.Status, rr.Message = res.status, res.message
			responses = append(responses, rr)
			if res.status == review.StatusPass {
				in = in.Next(res.object)
				view, st = in.Views()
			}
		}
		rules = append(rules, responses...)
		if cp.spec.GetApplyRules() == kyvernov1.ApplyOne && anyApplied(responses) {
			break
		}
	}
	return rules, in
}
