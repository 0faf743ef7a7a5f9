package engine

import (
	"context"

	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/cpol"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/review"
)

// requestView is a Request with everything derived from it worked out once
// and shared by every policy and rule (review.View), plus what the
// ClusterPolicy pipeline keeps of it (cpol.Request) and the rule responses.
type requestView struct {
	review.View
	cpol.Request

	// rules backs the rule responses of every policy evaluated over this
	// view (rulesUpFront makes room for them).
	rules review.RuleBuffer
}

func newRequestView(ctx context.Context, req *review.Request, cfg *review.Options) *requestView {
	in := new(requestView)
	in.Init(ctx, req, cfg)
	return in
}

// sameBuckets reports whether two views of a request read the same
// buckets of the index: the namespace they are matched in and their scope
// agree.
func sameBuckets(a, b *requestView) bool {
	return a.Scope == b.Scope && match.NamespaceOf(&a.Res) == match.NamespaceOf(&b.Res)
}

// oldInOtherNamespace reports whether the request's old object is matched
// in another namespace than its new one, which only a request that names
// neither can say (as `charter test` may give one): Generate matches the
// old object too, so it then reads the candidates of every namespace.
func (in *requestView) oldInOtherNamespace() bool {
	if in.Req.Object == nil || in.Req.OldObject == nil {
		return false
	}
	meta, _ := in.Req.OldObject["metadata"].(map[string]any)
	old := match.Resource{Kind: in.GVK}
	old.Name, old.Namespace = review.RequestIdentity(in.Req, meta)
	return match.NamespaceOf(&old) != match.NamespaceOf(&in.Res)
}

// validateResponses is the most validate responses p gives a request for
// kind ("" for any kind): one per validate or verifyImages rule that can
// select it, one for a ValidatingPolicy or an ImageValidatingPolicy.
func validateResponses(p *Policy, kind string) int {
	if p.vpol != nil || p.ivpol != nil || p.mpol != nil {
		return 1
	}
	return p.cpol.ValidateResponses(kind)
}

// validate evaluates the policy's validate rules.
func (p *Policy) validate(ctx context.Context, in *requestView, cfg *review.Options) review.PolicyResponse {
	resp := review.PolicyResponse{Policy: p.source, Key: p.key}
	if !p.scopes(in) {
		return resp
	}
	if p.vpol != nil {
		return p.validateCEL(ctx, in, cfg)
	}
	if p.ivpol != nil {
		return p.validateImages(ctx, in, cfg)
	}
	if p.mpol != nil {
		if !cfg.MutationScan {
			return resp
		}
		return review.PolicyResponse{Policy: p.source, Key: p.key, Rules: p.mpol.Scan(ctx, &in.View, cfg, p.owner())}
	}
	resp.Rules = p.cpol.Validate(ctx, &in.View, &in.Request, &p.set.env, cfg, &in.rules)
	return resp
}

// Views is the request's view and what the kyverno.io rules share over it
// (cpol.Input).
func (in *requestView) Views() (*review.View, *cpol.Request) { return &in.View, &in.Request }

// Next is the view of the same request with another object (cpol.Input).
func (in *requestView) Next(obj map[string]any) cpol.Input { return in.withObject(obj) }

// validateCEL evaluates a ValidatingPolicy, its one response kept in the
// review's backing array of rule responses.
func (p *Policy) validateCEL(ctx context.Context, in *requestView, cfg *review.Options) review.PolicyResponse {
	rr, ok := p.vpol.Validate(ctx, &in.View, cfg, p.owner())
	return p.respondOnce(in, rr, ok)
}

// respondOnce is the policy's response of one rule response rr, kept in
// the review's backing array of rule responses; with ok false, no rule.
func (p *Policy) respondOnce(in *requestView, rr review.RuleResponse, ok bool) review.PolicyResponse {
	resp := review.PolicyResponse{Policy: p.source, Key: p.key}
	if !ok {
		return resp
	}
	resp.Rules = in.rules.One(rr)
	return resp
}

// celInputs builds the request's CEL variables on first use. The objects
// are wrapped, not copied: the CEL adapter reads the unstructured maps in
// place.
func (in *requestView) celInputs() *celruntime.Inputs { return celruntime.InputsOf(&in.View) }
