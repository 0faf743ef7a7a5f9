package engine

import (
	"context"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/ivpol"
	"github.com/charter-dev/charter/engine/podimages"
	"github.com/charter-dev/charter/engine/review"
)

// validateImages evaluates an ImageValidatingPolicy (§3.3.5), its one
// response kept in the review's backing array of rule responses.
func (p *Policy) validateImages(ctx context.Context, in *requestView, cfg *review.Options) review.PolicyResponse {
	rr, ok := p.ivpol.Validate(ctx, &in.View, cfg, p.owner())
	return p.respondOnce(in, rr, ok)
}

// WithImageDigestPins makes Mutate pin the images of
// ImageValidatingPolicies with mutateDigest (the default) to the digest
// their tag names now, as Kyverno's ivpol mutating webhook does (§3.3.5):
// the containers', initContainers' and ephemeralContainers' images that
// match the policy's matchImageReferences and name no digest. Nothing is
// verified then: the validating phase verifies the pinned digest. The CLI
// leaves it off, as Kyverno's does.
func WithImageDigestPins() EvalOption {
	return func(c *review.Options) { c.ImageDigestPins = true }
}

// imageDigestPhase pins digests for the ImageValidatingPolicies among the
// candidates; the first pin of an image wins. A tag that cannot be
// resolved is an error of a Deny policy (so failurePolicy decides), and
// the other images are still pinned; an Audit or Warn policy only leaves
// the image unpinned.
func (s *PolicySet) imageDigestPhase(ctx context.Context, in *requestView, cfg *review.Options, candidates []*Policy, resp *MutateResponse) *requestView {
	obj := in.Req.Object
	images, pullSecrets := podimages.Of(obj)
	if len(images) == 0 {
		return in
	}
	pins := map[string]string{}
	for _, p := range candidates {
		if p.ivpol == nil || !p.scopes(in) {
			continue
		}
		resolve := p.ivpol.DigestResolver(ctx, &in.View, cfg, pullSecrets)
		if resolve == nil {
			continue
		}
		var errs []string
		for _, img := range images {
			if _, done := pins[img.Pointer]; done || img.Info.Digest != "" {
				continue
			}
			digest, ok, err := resolve(img.Raw, img.Info.ReferenceWithTag())
			switch {
			case err != nil:
				errs = append(errs, err.Error())
			case ok:
				pins[img.Pointer] = img.Raw + "@" + digest
			}
		}
		if len(errs) > 0 && p.ivpol.Action() == review.Enforce {
			rr := review.RuleResponse{Name: p.source.GetName(), Type: review.TypeImageVerify, Action: review.Enforce, Status: review.StatusError,
				Message: "failed to update digest: " + strings.Join(errs, "; ")}
			resp.Policies = append(resp.Policies, review.PolicyResponse{Policy: p.source, Key: p.key, Rules: []review.RuleResponse{rr}, Patched: obj})
		}
	}
	if len(pins) == 0 {
		return in
	}
	patched, err := podimages.Patches(obj, pins)
	if err != nil {
		return in
	}
	return in.withObject(patched)
}

// settleRequiredImages fails the passing ImageValidatingPolicies that
// require their images verified when no policy of the request verified
// one of them (§3.3.5 step 8). It runs once every policy of the request
// has; under WithDeferredRequiredImages it leaves the work to
// SettleRequiredImages and keeps what it needs on resp.
func (in *requestView) settleRequiredImages(resp *Response, policies []review.PolicyResponse) {
	st, _ := in.IVPol.(*ivpol.Request)
	if st == nil {
		return
	}
	if in.Opts.DeferRequiredImages && resp != nil {
		resp.images = st
		return
	}
	settleRequired(st, st.Matched, policies)
}

// WithDeferredRequiredImages makes Validate leave ImageValidatingPolicies'
// `required` unsettled, for SettleRequiredImages to settle across the
// responses of several sets evaluated for one request (the admission
// webhook evaluates its failurePolicy Fail and Ignore policies apart): an
// image one set verified satisfies the other's requirement.
func WithDeferredRequiredImages() EvalOption {
	return func(c *review.Options) { c.DeferRequiredImages = true }
}

// SettleRequiredImages settles `required` across the responses of one
// request evaluated under WithDeferredRequiredImages.
func SettleRequiredImages(responses ...*Response) {
	all := &ivpol.Request{Verified: map[string]int{}, Checked: map[string]bool{}}
	for _, r := range responses {
		if r == nil || r.images == nil {
			continue
		}
		for img, n := range r.images.Verified {
			all.Verified[img] += n
		}
		for img := range r.images.Checked {
			all.Checked[img] = true
		}
	}
	for _, r := range responses {
		if r != nil && r.images != nil {
			settleRequired(all, r.images.Matched, r.Policies)
			r.images = nil
		}
	}
}

// settleRequired fails each passing ImageValidatingPolicy (by key in
// matched) one of whose images st does not count as verified. Only those
// kinds' responses are looked up: a ClusterPolicy may share an
// ImageValidatingPolicy's key.
func settleRequired(st *ivpol.Request, matched map[string][]string, policies []review.PolicyResponse) {
	for i := range policies {
		p := &policies[i]
		if _, ivpol := p.Policy.(policiesv1.ImageValidatingPolicyLike); !ivpol {
			continue
		}
		images := matched[p.Key]
		if len(images) == 0 || len(p.Rules) != 1 || p.Rules[0].Status != review.StatusPass {
			continue
		}
		for _, img := range images {
			if st.Verified[img] > 0 {
				continue
			}
			msg := "image " + img + " is not verified: no policy performed a signature or attestation check on it"
			if st.Checked[img] {
				msg = "image " + img + " failed signature or attestation verification"
			}
			r := &p.Rules[0]
			r.Status, r.Message = review.StatusFail, msg
			if p.Policy.GetAnnotations()[kyvernov1.AnnotationPolicyScored] == "false" {
				r.Status = review.StatusWarn
			}
			break
		}
	}
}
