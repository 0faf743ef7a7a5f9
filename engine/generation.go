package engine

import (
	"context"
	"time"

	"github.com/charter-dev/charter/engine/cpol"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/review"
)

// GenerateResponse holds the results of the generate rules of a PolicySet
// for one trigger.
type GenerateResponse struct {
	Resource review.ResourceRef
	// Policies holds one entry per policy with at least one rule response;
	// RuleResponse.Generated lists each passing rule's desired objects
	// (and, under WithCLIGeneration, those of skipped foreach rules).
	Policies []review.PolicyResponse
}

// Objects returns every desired object of the response, in policy and
// rule order.
func (r *GenerateResponse) Objects() []generate.DesiredObject {
	var out []generate.DesiredObject
	for _, p := range r.Policies {
		for _, rr := range p.Rules {
			out = append(out, rr.Generated...)
		}
	}
	return out
}

// generateCEL evaluates a GeneratingPolicy for a request (engine/gpol): the
// policy's one rule response, or nil when it gives none.
func (p *Policy) generateCEL(ctx context.Context, req *review.Request, in *requestView, cfg *review.Options) *review.PolicyResponse {
	rr, ok := p.gpol.Generate(ctx, req, &in.View, cfg, p.owner())
	if !ok {
		return nil
	}
	return &review.PolicyResponse{Policy: p.source, Key: p.key, Rules: []review.RuleResponse{rr}}
}

// Generate evaluates the generate rules of every policy that can match the
// request (spec §8.2–8.3). A rule whose match and preconditions hold
// passes with the objects it wants to exist; one whose preconditions do not
// hold is skipped. When the new object no longer matches but the old one
// did (DELETE, or an UPDATE away from the rule), the rule fails: that tells
// a controller the downstream objects of a synchronized rule must go.
// Clone sources come from Loaders.Objects.
func (s *PolicySet) Generate(ctx context.Context, req *review.Request, opts ...EvalOption) *GenerateResponse {
	cfg := newEvalConfig(opts)
	in := newRequestView(ctx, req, &cfg)
	resp := &GenerateResponse{Resource: in.ResourceRef()}
	var old cpol.OldView
	for _, p := range s.candidatesIn(in, in.oldInOtherNamespace()) {
		if !p.scopes(in) {
			continue
		}
		if p.gpol != nil {
			// A GeneratingPolicy is timed for its kind's metrics
			// (kyverno_generating_policy_execution_duration_seconds).
			start := time.Now()
			if pr := p.generateCEL(ctx, req, in, &cfg); pr != nil {
				pr.Duration = time.Since(start)
				resp.Policies = append(resp.Policies, *pr)
			}
			continue
		}
		if rules := p.cpol.Generate(ctx, req, &in.View, &in.Request, &old, &p.set.env, &cfg); len(rules) > 0 {
			resp.Policies = append(resp.Policies, review.PolicyResponse{Policy: p.source, Key: p.key, Rules: rules})
		}
	}
	return resp
}
