package engine

import (
	"context"
	"time"

	"github.com/charter-dev/charter/engine/review"
)

// ValidateTimed is Validate that also times each policy: every
// PolicyResponse carries in Duration how long its policy's rules took,
// from matching to the handler's verdict. The responses are otherwise
// exactly Validate's.
//
// The admission server records kyverno_policy_execution_duration_seconds
// from these durations. Timing policy by policy from outside, with one
// Policy.Validate call each, would rebuild the request's view and context
// document for every policy; here they are built once and shared, as in
// Validate. Reading the clock is the only extra cost (two calls per
// candidate policy), and it happens in the caller's goroutine, so the
// engine stays pure.
func (s *PolicySet) ValidateTimed(ctx context.Context, req *review.Request, opts ...EvalOption) *Response {
	cfg := newEvalConfig(opts)
	in := newRequestView(ctx, req, &cfg)
	resp := &Response{Resource: in.ResourceRef()}
	candidates := s.candidates(in)
	// Room for every candidate up front: a review that matches the Pod
	// Security policies would otherwise grow the slice five times.
	resp.Policies = make([]review.PolicyResponse, 0, len(candidates))
	// And for their rule responses, in one slice (rulesUpFront).
	s.rulesUpFront(in)
	for _, p := range candidates {
		start := time.Now()
		pr := p.validate(ctx, in, &cfg)
		if len(pr.Rules) > 0 {
			pr.Duration = time.Since(start)
			resp.Policies = append(resp.Policies, pr)
		}
	}
	in.settleRequiredImages(resp, resp.Policies)
	return resp
}
