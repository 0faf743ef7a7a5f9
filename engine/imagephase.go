package engine

import (
	"context"
	"maps"
	"time"

	"github.com/charter-dev/charter/engine/podimages"
	"github.com/charter-dev/charter/engine/review"
)

// The mutating phase of verifyImages rules, after every mutate rule:
// digests pinned and statuses recorded in annotations across policies.

// WithImagesVerifiedSince makes verifyImages rules use only cached
// verifications made at or after t, and ask the registry again for older
// ones. The periodic background rescan passes its start time: every image
// is verified again once per rescan (the first resource that names it
// refreshes the cache for the others), so a signature removed since
// admission turns the report to fail on the next rescan (§8.5, Kyverno
// #7525) without a registry round trip per resource.
func WithImagesVerifiedSince(t time.Time) EvalOption {
	return func(c *review.Options) { c.ImagesVerifiedSince = t }
}

// scopedPolicyKey is the policy's key in the scoped annotation: "/name"
// for a cluster policy, "ns/name" for a namespaced one.
func scopedPolicyKey(p *Policy) string {
	if ns := p.source.GetNamespace(); ns != "" {
		return ns + "/" + p.source.GetName()
	}
	return "/" + p.source.GetName()
}

// verifyImagesPhase runs the verifyImages rules of every candidate policy
// after all mutate rules, as Kyverno's mutating webhook does (§2.2): their
// responses join each policy's response, verified images are pinned to
// the digest verified, and the statuses are recorded in the annotations.
func (s *PolicySet) verifyImagesPhase(ctx context.Context, in *requestView, cfg *review.Options, candidates []*Policy, resp *MutateResponse) *requestView {
	scoped := map[string]map[string]map[string]string{}
	obj := in.Req.Object
	for _, p := range candidates {
		rules, out, patched, recorded := p.cpol.VerifyImages(ctx, in, &p.set.env, cfg, obj)
		in, obj = out.(*requestView), patched
		if len(recorded) > 0 {
			key := scopedPolicyKey(p)
			if scoped[key] == nil {
				scoped[key] = recorded
			} else {
				maps.Copy(scoped[key], recorded)
			}
		}
		if len(rules) == 0 {
			continue
		}
		merged := false
		for i := range resp.Policies {
			if responseOf(&resp.Policies[i], p) {
				resp.Policies[i].Rules = append(resp.Policies[i].Rules, rules...)
				resp.Policies[i].Patched = obj
				merged = true
			}
		}
		if !merged {
			resp.Policies = append(resp.Policies, review.PolicyResponse{Policy: p.source, Key: p.key, Rules: rules, Patched: obj})
		}
	}
	if annotated, err := podimages.Annotations(obj, scoped); err == nil && len(scoped) > 0 {
		in = in.withObject(annotated)
	}
	return in
}
