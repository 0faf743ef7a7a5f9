package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/internal/corpus"
)

// podSecurityPairs loads the corpus's Pod Security set in its two forms:
// every ValidatingPolicy of pod-security-vpol/{baseline,restricted} and
// the ClusterPolicy of the same name in pod-security/, as
// bench-admission's vpol mode serves them.
func podSecurityPairs(b testing.TB) (cpols, vpols []kyvernov1.PolicyInterface) {
	root := filepath.Join(corpus.Require(b), "kyverno-policies")
	for _, level := range []string{"baseline", "restricted"} {
		dirs, err := os.ReadDir(filepath.Join(root, "pod-security-vpol", level))
		if err != nil {
			b.Skipf("conformance corpus not available: %v", err)
		}
		for _, d := range dirs {
			if !d.IsDir() {
				continue
			}
			for _, doc := range readDocs(b, filepath.Join(root, "pod-security-vpol", level, d.Name(), d.Name()+".yaml")) {
				data, _ := json.Marshal(doc)
				vp := &policiesv1.ValidatingPolicy{}
				if err := json.Unmarshal(data, vp); err != nil {
					b.Fatal(err)
				}
				vpols = append(vpols, vp)
			}
			cpols = append(cpols, loadSuitePolicies(b, "/", []string{filepath.Join(root, "pod-security", level, d.Name(), d.Name()+".yaml")})...)
		}
	}
	if len(vpols) == 0 || len(vpols) != len(cpols) {
		b.Fatalf("%d ValidatingPolicies, %d ClusterPolicies: want pairs", len(vpols), len(cpols))
	}
	return cpols, vpols
}

// withLongStrings is p with the long strings real Pods have: every image
// referenced by digest (about 100 characters), a 2 KB annotation and a
// container script of 1 KB.
func withLongStrings(p map[string]any) map[string]any {
	p = deepCopyMap(p)
	meta := p["metadata"].(map[string]any)
	meta["annotations"] = map[string]any{"example.com/config": strings.Repeat("k=v;", 512)}
	for i, c := range p["spec"].(map[string]any)["containers"].([]any) {
		c := c.(map[string]any)
		c["image"] = fmt.Sprintf("registry.example.com/platform/team-%d/%s@sha256:%064x", i, c["name"], 0xc0ffee+i)
		c["command"] = []any{"/bin/sh", "-c", strings.Repeat("echo ok && ", 93)}
	}
	return p
}

// deepCopyMap copies an unstructured object.
func deepCopyMap(m map[string]any) map[string]any {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

// podSecurityMix is a mix of Pods for the Pod Security set: compliant
// ones and ones failing baseline or restricted checks, half and half.
func podSecurityMix() []map[string]any {
	restricted := func(i int) map[string]any {
		p := benchPod(i)
		spec := p["spec"].(map[string]any)
		spec["containers"] = spec["containers"].([]any)[:1]
		return p
	}
	first := func(p map[string]any) map[string]any {
		return p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	}
	var pods []map[string]any
	for i := range 8 {
		pods = append(pods, restricted(i))
		p := restricted(i)
		switch i % 4 {
		case 0:
			first(p)["securityContext"].(map[string]any)["privileged"] = true
		case 1:
			p["spec"].(map[string]any)["hostNetwork"] = true
		case 2:
			p["spec"].(map[string]any)["volumes"] = []any{map[string]any{"name": "host", "hostPath": map[string]any{"path": "/var/run"}}}
		case 3:
			pods = append(pods, benchPod(i)) // a sidecar without a securityContext
			continue
		}
		pods = append(pods, p)
	}
	return pods
}

// longStringMix is podSecurityMix withLongStrings.
func longStringMix() []map[string]any {
	pods := podSecurityMix()
	for i, p := range pods {
		pods[i] = withLongStrings(p)
	}
	return pods
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
		{"clusterpolicies", cpols, podSecurityMix()}, {"validatingpolicies", vpols, podSecurityMix()},
		// The same Pods with digest images, a 2 KB annotation and a 1 KB
		// script, as real clusters have.
		{"clusterpolicies/long-strings", cpols, longStringMix()}, {"validatingpolicies/long-strings", vpols, longStringMix()},
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
