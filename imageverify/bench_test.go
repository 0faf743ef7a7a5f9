package imageverify_test

import (
	"context"
	"testing"
	"time"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// BenchmarkCachedReview times an admission review of a Pod (mutating
// phase, then validating phase on its result) whose image is already in
// the verification cache, against the same review without the
// verifyImages policy: the difference is what a cache hit adds. make
// bench-images prints its p99 against the 1 ms target.
func BenchmarkCachedReview(b *testing.B) {
	reg := imagetest.NewRegistry(b)
	key := imagetest.NewKey(b)
	img := reg.Push(b, "app", "v1")
	reg.Sign(b, img, key.Signer, imagetest.SignOptions{})
	labels := policyDoc(b, `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-labels}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-app
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: an app label is required
      pattern: {metadata: {labels: {app: "?*"}}}
`)
	images := policy(b, keyEntry(reg.Host+"/app*", key.PublicPEM, ""))
	v := imageverify.New(imageverify.Options{Egress: imagetest.LoopbackEgress(), Cache: imageverify.NewCache(100, time.Hour, nil)})
	opts := []engine.EvalOption{engine.WithLoaders(loader.Loaders{ImageVerifier: v})}
	for _, c := range []struct {
		name     string
		policies []kyvernov1.PolicyInterface
	}{
		{"without verifyImages", []kyvernov1.PolicyInterface{labels}},
		{"with verifyImages", []kyvernov1.PolicyInterface{labels, images}},
	} {
		set, err := engine.Compile(c.policies)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			obj := pod(img.DigestRef)
			obj["metadata"].(map[string]any)["labels"] = map[string]any{"app": "a"}
			review := func() {
				m := set.Mutate(ctx, &engine.Request{Operation: kyvernov1.Create, Object: obj}, opts...)
				if m.Blocked() {
					b.Fatalf("blocked: %+v", m.Policies)
				}
				set.Validate(ctx, &engine.Request{Operation: kyvernov1.Create, Object: m.Object}, opts...)
			}
			review() // fills the cache
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				review()
			}
		})
	}
}
