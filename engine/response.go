package engine

import (
	"github.com/charter-dev/charter/engine/ivpol"
	"github.com/charter-dev/charter/engine/review"
)

// Response holds the results of evaluating a PolicySet against one request.
type Response struct {
	// Resource is the object evaluated (the old object on DELETE).
	Resource review.ResourceRef
	// Policies holds one entry per policy with at least one rule response.
	Policies []review.PolicyResponse
	// images is what the request's ImageValidatingPolicies verified and
	// require, kept under WithDeferredRequiredImages until
	// SettleRequiredImages.
	images *ivpol.Request
}

// Blocked reports whether some rule failed with an effective action of
// Enforce, which denies an admission request.
func (r *Response) Blocked() bool {
	for _, p := range r.Policies {
		for _, rr := range p.Rules {
			if rr.Status == review.StatusFail && rr.Action == review.Enforce {
				return true
			}
		}
	}
	return false
}

// responseOf reports whether the response is the policy's, without
// building an ID.
func responseOf(r *review.PolicyResponse, p *Policy) bool {
	return r.Key == p.key && r.Policy != nil && r.Policy.GetKind() == p.source.GetKind()
}
