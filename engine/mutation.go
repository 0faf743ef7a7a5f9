package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/mutate"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/variables"
)

// MutateResponse holds the results of running the mutate rules of a
// PolicySet against one request.
type MutateResponse struct {
	// Resource is the object evaluated.
	Resource review.ResourceRef
	// Policies holds one entry per policy with at least one rule response,
	// in compile order. PolicyResponse.Patched is the object after that
	// policy's rules (and every earlier policy's).
	Policies []review.PolicyResponse
	// Object is the request's object with every patch applied; the
	// request's object itself when nothing changed.
	Object map[string]any
	// Patch is one RFC 6902 patch from the request's object to Object,
	// deterministic and minimal (see mutate.Diff); empty when nothing
	// changed. JSONPatch encodes it for an AdmissionResponse.
	Patch []mutate.Operation
}

// JSONPatch encodes Patch as an AdmissionResponse carries it; nil when
// there is nothing to patch.
func (r *MutateResponse) JSONPatch() ([]byte, error) { return mutate.MarshalPatch(r.Patch) }

// Errors returns the rule responses with status error, each with its
// policy, in order. Admission denies a request with an erroring rule of a
// policy whose failurePolicy is Fail (the default).
func (r *MutateResponse) Errors() []PolicyRuleResponse {
	var out []PolicyRuleResponse
	for i := range r.Policies {
		for _, rr := range r.Policies[i].Rules {
			if rr.Status == review.StatusError {
				out = append(out, PolicyRuleResponse{Policy: &r.Policies[i], Rule: rr})
			}
		}
	}
	return out
}

// Blocked reports whether admission must deny the request: a mutate rule
// of a policy whose failurePolicy is Fail (the default) ended in error.
// Under Ignore the rule's error is reported and the request goes on with
// the other rules' patches (spec §6, without Kyverno's sticky Fail flag).
//
// A verifyImages rule that fails with an effective action of Enforce
// blocks too.
func (r *MutateResponse) Blocked() bool {
	for _, e := range r.Errors() {
		if e.Policy.Policy == nil || e.Policy.Policy.GetSpec().GetFailurePolicy() != kyvernov1.Ignore {
			return true
		}
	}
	for _, p := range r.Policies {
		for _, rr := range p.Rules {
			if rr.Type == review.TypeImageVerify && rr.Status == review.StatusFail && rr.Action == review.Enforce {
				return true
			}
		}
	}
	return false
}

// PatchedTargets returns the existing resources mutate-existing rules
// patched, in rule order; a target patched by several rules appears once
// per rule.
func (r *MutateResponse) PatchedTargets() []map[string]any {
	var out []map[string]any
	for _, p := range r.Policies {
		for _, rr := range p.Rules {
			if rr.PatchedTarget != nil {
				out = append(out, rr.PatchedTarget)
			}
		}
	}
	return out
}

// PolicyRuleResponse is a rule response with the policy it belongs to.
type PolicyRuleResponse struct {
	Policy *review.PolicyResponse
	Rule   review.RuleResponse
}

// WithMutateExisting makes Mutate run mutate-existing rules
// (mutate.targets) against the objects Loaders.Objects supplies, as the
// background controller and the CLI do. Admission leaves it off: there
// such rules produce no response, as in Kyverno.
func WithMutateExisting() EvalOption {
	return func(c *review.Options) { c.MutateExisting = true }
}

// Mutate runs the mutate rules of every policy that can match the request,
// in compile order and, within a policy, in rule order (the policy's rules,
// then their autogen rules). Each rule sees the object as the rules before
// it left it: its match, preconditions and variables all read the current
// object, and the next policy starts from the previous one's result.
//
// A rule that fails with an error leaves the object as it was before that
// rule and the following rules still run. Kyverno instead empties the
// object, which silently disables every later rule and policy (spec §1.5);
// no policy author means that, and admission still denies the request
// through Errors when the policy's failurePolicy is Fail.
func (s *PolicySet) Mutate(ctx context.Context, req *review.Request, opts ...EvalOption) *MutateResponse {
	cfg := newEvalConfig(opts)
	in := newRequestView(ctx, req, &cfg)
	resp := &MutateResponse{Resource: in.ResourceRef(), Object: req.Object}
	first := in
	candidates := s.candidates(in)
	var reinvoke []reinvocation
	for i := 0; i < len(candidates); i++ {
		p := candidates[i]
		pr, out := p.mutate(ctx, in, &cfg)
		if out != in && !sameBuckets(in, out) {
			// A rule moved the object to another namespace: the policies
			// after p are those that can select it there.
			later := slices.DeleteFunc(slices.Clone(s.candidates(out)), func(q *Policy) bool { return q.order <= p.order })
			candidates = slices.Concat(candidates[:i+1], later)
		}
		in = out
		if len(pr.Rules) > 0 {
			if p.mpol != nil && p.mpol.Reinvoked() {
				reinvoke = append(reinvoke, reinvocation{policy: p, index: len(resp.Policies), after: in.Req.Object})
			}
			resp.Policies = append(resp.Policies, pr)
		}
	}
	in = s.reinvoke(ctx, in, &cfg, reinvoke, resp)
	if !sameBuckets(first, in) {
		candidates = s.candidates(in)
	}
	if req.Object != nil && req.Operation != kyvernov1.Delete {
		in = s.verifyImagesPhase(ctx, in, &cfg, candidates, resp)
		if cfg.ImageDigestPins {
			in = s.imageDigestPhase(ctx, in, &cfg, candidates, resp)
		}
	}
	if req.Object != nil {
		resp.Object = in.Req.Object
		resp.Patch = mutate.Diff(req.Object, resp.Object)
	}
	return resp
}

// reinvocation is a MutatingPolicy with reinvocationPolicy IfNeeded that
// responded: its response's index and the object it left.
type reinvocation struct {
	policy *Policy
	index  int
	after  map[string]any
}

// reinvoke runs each IfNeeded MutatingPolicy once more, in order, when a
// later policy changed the object it left, as the API server reinvokes a
// MutatingAdmissionPolicy; its new response replaces the first. One round,
// as in Kubernetes: a policy that keeps fighting another does not loop.
func (s *PolicySet) reinvoke(ctx context.Context, in *requestView, cfg *review.Options, pending []reinvocation, resp *MutateResponse) *requestView {
	for _, r := range pending {
		if reflect.DeepEqual(r.after, in.Req.Object) {
			continue
		}
		pr, out := r.policy.mutate(ctx, in, cfg)
		in = out
		if len(pr.Rules) > 0 {
			resp.Policies[r.index] = pr
		}
	}
	return in
}

// Mutate runs this policy's mutate rules against the request; see
// PolicySet.Mutate.
func (p *Policy) Mutate(ctx context.Context, req *review.Request, opts ...EvalOption) review.PolicyResponse {
	cfg := newEvalConfig(opts)
	pr, _ := p.mutate(ctx, newRequestView(ctx, req, &cfg), &cfg)
	return pr
}

// Evaluation is the result of Evaluate: the mutation, then the validation
// of the mutated object.
type Evaluation struct {
	Mutation   *MutateResponse
	Validation *Response
}

// Evaluate runs mutation first, across all policies, and then validation
// on the mutated object, as admission does.
func (s *PolicySet) Evaluate(ctx context.Context, req *review.Request, opts ...EvalOption) *Evaluation {
	m := s.Mutate(ctx, req, opts...)
	mutated := *req
	if req.Object != nil {
		mutated.Object = m.Object
	}
	return &Evaluation{Mutation: m, Validation: s.Validate(ctx, &mutated, opts...)}
}

// mutate runs the policy's mutate rules and returns its response and the
// request view of the resulting object.
func (p *Policy) mutate(ctx context.Context, in *requestView, cfg *review.Options) (review.PolicyResponse, *requestView) {
	resp := review.PolicyResponse{Policy: p.source, Key: p.key}
	if !p.scopes(in) {
		resp.Patched = in.Req.Object
		return resp, in
	}
	if p.mpol != nil {
		rules, patched := p.mpol.Mutate(ctx, &in.View, cfg, p.owner())
		if patched != nil {
			in = in.withObject(patched)
		}
		return review.PolicyResponse{Policy: p.source, Key: p.key, Patched: in.Req.Object, Rules: rules}, in
	}
	var ev *evaluation
	for _, r := range p.cpol.ruleList() {
		if r.typ != review.TypeMutation || r.mutate == nil {
			continue
		}
		existing := len(r.mutate.targets) > 0
		if existing && !cfg.MutateExisting {
			continue
		}
		if !existing && in.Req.Object == nil {
			// Nothing to patch (DELETE).
			continue
		}
		if !r.selects(&in.Res) {
			continue
		}
		if ev == nil || ev.in != in {
			ev = &evaluation{set: p.set, policy: p, in: in, cfg: cfg, object: in.Object}
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
			res := ev.mutateObject(ctx, doc, r, in.Object)
			rr.Status, rr.Message = res.status, res.message
			responses = append(responses, rr)
			if res.status == review.StatusPass {
				in = in.withObject(res.object)
			}
		}
		resp.Rules = append(resp.Rules, responses...)
		if p.cpol.spec.GetApplyRules() == kyvernov1.ApplyOne && anyApplied(responses) {
			break
		}
	}
	resp.Patched = in.Req.Object
	return resp, in
}

func anyApplied(rrs []review.RuleResponse) bool {
	for _, rr := range rrs {
		if rr.Status != review.StatusSkip {
			return true
		}
	}
	return false
}

// withObject returns the view of the same request with a new object, as
// the next mutate rule sees it.
func (in *requestView) withObject(obj map[string]any) *requestView {
	out := new(requestView)
	out.InitWithObject(&in.View, obj)
	return out
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
