package engine

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/internal/testpods"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/internal/corpus"
)

// podSecurityPairs loads the corpus's Pod Security set in its two forms:
// every ValidatingPolicy of pod-security-vpol/{baseline,restricted} and
// the ClusterPolicy of the same name in pod-security/, as
// bench-admission's vpol mode serves them.
func podSecurityPairs(b testing.TB) (cpols, vpols []kyvernov1.PolicyInterface) {
	vps, files := testpods.PodSecurityValidatingPolicies(b, filepath.Join(corpus.Require(b), "kyverno-policies"))
	for _, vp := range vps {
		vpols = append(vpols, vp)
	}
	for _, file := range files {
		cpols = append(cpols, loadSuitePolicies(b, "/", []string{file})...)
	}
	if len(vpols) == 0 || len(vpols) != len(cpols) {
		b.Fatalf("%d ValidatingPolicies, %d ClusterPolicies: want pairs", len(vpols), len(cpols))
	}
	return cpols, vpols
}

// BenchmarkValidatePodSecurityForms evaluates the same Pods through the
// Pod Security set as ClusterPolicies and as their ValidatingPolicy
// translations, as an admission request for pods: issue 17's target is
// the ValidatingPolicies within 10% of the ClusterPolicies at admission.
// allocs/op and B/op are deterministic; compare ns/op within one run.
func BenchmarkValidatePodSecurityForms(b *testing.B) {
	cpols, vpols := podSecurityPairs(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name     string
		policies []kyvernov1.PolicyInterface
		pods     []map[string]any
	}{
		{"clusterpolicies", cpols, testpods.SecurityMix()}, {"validatingpolicies", vpols, testpods.SecurityMix()},
		// The same Pods with digest images, a 2 KB annotation and a 1 KB
		// script, as real clusters have.
		{"clusterpolicies/long-strings", cpols, testpods.LongStringMix()}, {"validatingpolicies/long-strings", vpols, testpods.LongStringMix()},
	} {
		set, err := Compile(bc.policies)
		if err != nil {
			b.Fatal(err)
		}
		pods := bc.pods
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				resp := set.Validate(ctx, &review.Request{
					Operation: kyvernov1.Create, Object: pods[i%len(pods)],
					Kind:     schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
					Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
				})
				if len(resp.Policies) == 0 {
					b.Fatal("no responses")
				}
				i++
			}
		})
	}
}
