package server

import (
	"context"
	"time"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/webhook/metrics"
)

// resourceOnly is a set with no policies: its Validate returns just the
// engine's reference to the request's resource, the head of a Response
// assembled policy by policy.
var resourceOnly = func() *engine.PolicySet {
	s, err := engine.Compile(nil)
	if err != nil {
		panic("server: compiling no policies failed: " + err.Error())
	}
	return s
}()

// validateSet runs the set's validate rules against req and records
// kyverno_policy_results_total and kyverno_policy_execution_duration_seconds.
// The engine reports no per-rule timings, so with metrics on each policy is
// evaluated and timed on its own (Policy.Validate); the response is what
// PolicySet.Validate returns. Without metrics the set is evaluated in one
// call.
func (h *handlers) validateSet(ctx context.Context, set *engine.PolicySet, req *engine.Request, mreq metrics.Request) *engine.Response {
	loaders := engine.WithLoaders(h.opts.Loaders)
	if h.opts.Metrics == nil {
		return set.Validate(ctx, req, loaders)
	}
	resp := resourceOnly.Validate(ctx, req)
	for _, p := range set.Policies() {
		start := time.Now()
		pr := p.Validate(ctx, req, loaders)
		took := time.Since(start)
		if len(pr.Rules) == 0 {
			continue
		}
		h.opts.Metrics.ObservePolicy(mreq, pr, took)
		resp.Policies = append(resp.Policies, pr)
	}
	return resp
}
