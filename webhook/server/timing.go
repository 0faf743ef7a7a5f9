package server

import (
	"context"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/webhook/metrics"
)

// validateSet runs the set's validate rules against req. The set is
// evaluated in one call, so the request's context document is built once;
// with metrics on the engine also times each policy
// (PolicySet.ValidateTimed) for observeSet. ImageValidatingPolicies'
// `required` is left for engine.SettleRequiredImages, across the sets of
// the request.
func (h *handlers) validateSet(ctx context.Context, set *engine.PolicySet, req *engine.Request) *engine.Response {
	loaders := engine.WithLoaders(h.opts.Loaders)
	deferred := engine.WithDeferredRequiredImages()
	// A policy with webhook matchConditions is only ever in the set of its
	// own webhook, whose conditions the API server has evaluated.
	met := engine.WithWebhookConditionsMet()
	if h.opts.Metrics == nil {
		return set.Validate(ctx, req, loaders, deferred, met)
	}
	return set.ValidateTimed(ctx, req, loaders, deferred, met)
}

// observeSet records kyverno_policy_results_total and
// kyverno_policy_execution_duration_seconds of a settled response, with
// metrics on.
func (h *handlers) observeSet(resp *engine.Response, mreq metrics.Request) {
	if h.opts.Metrics == nil {
		return
	}
	for i := range resp.Policies {
		h.opts.Metrics.ObservePolicy(mreq, resp.Policies[i], resp.Policies[i].Duration)
	}
}
