package engine

import (
	"context"
	"reflect"
	"slices"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/mutate"
	"github.com/charter-dev/charter/engine/review"
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
	rules, out := p.cpol.Mutate(ctx, in, &p.set.env, cfg)
	in = out.(*requestView)
	resp.Rules = rules
	resp.Patched = in.Req.Object
	return resp, in
}

// withObject returns the view of the same request with a new object, as
// the next mutate rule sees it.
func (in *requestView) withObject(obj map[string]any) *requestView {
	out := new(requestView)
	out.InitWithObject(&in.View, obj)
	return out
}
