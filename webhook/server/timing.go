package server

import (
	"context"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/webhook/metrics"
)

// validateSet runs the set's validate rules against req and, with metrics
// on, records kyverno_policy_results_total and
// kyverno_policy_execution_duration_seconds. The set is evaluated in one
// call either way, so the request's context document is built once; with
// metrics the engine also times each policy (PolicySet.ValidateTimed).
func (h *handlers) validateSet(ctx context.Context, set *engine.PolicySet, req *engine.Request, mreq metrics.Request) *engine.Response {
	loaders := engine.WithLoaders(h.opts.Loaders)
	if h.opts.Metrics == nil {
		return set.Validate(ctx, req, loaders)
	}
	resp := set.ValidateTimed(ctx, req, loaders)
	for i := range resp.Policies {
		h.opts.Metrics.ObservePolicy(mreq, resp.Policies[i], resp.Policies[i].Duration)
	}
	return resp
}
