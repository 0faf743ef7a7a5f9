package admission

import (
	"time"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/server"
)

// meteredMutator is the server's EngineMutator recording the mutate
// rules' results and execution time (kyverno_policy_results_total and
// kyverno_policy_execution_duration_seconds with rule_type="mutate") on
// every evaluation.
func meteredMutator(loaders loader.Loaders, rec *metrics.Recorder) server.EngineMutator {
	return server.EngineMutator{
		Loaders: loaders,
		Observe: func(req *engine.Request, resp *engine.MutateResponse, elapsed time.Duration) {
			rec.ObserveMutation(mutationRequest(req), resp, elapsed)
		},
	}
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
