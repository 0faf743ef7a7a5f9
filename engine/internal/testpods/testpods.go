// Package testpods holds the Pods and the Pod Security policies that the
// tests and benchmarks of the engine's root and of its kinds' packages
// share. It imports no part of the engine, so a kind's own tests can use
// it; nothing but tests imports it.
package testpods

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// Pod is a Pod that passes the restricted Pod Security level in its first
// container, with a sidecar that sets no securityContext; i varies a label.
func Pod(i int) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name": "web", "namespace": "default",
			"labels": map[string]any{"app": "web", "n": string(rune('a' + i%26))},
		},
		"spec": map[string]any{
			"containers": []any{
				map[string]any{
					"name": "app", "image": "ghcr.io/example/app:1.2.3",
					"ports": []any{map[string]any{"containerPort": float64(8080)}},
					"securityContext": map[string]any{
						"allowPrivilegeEscalation": false, "runAsNonRoot": true,
						"capabilities":   map[string]any{"drop": []any{"ALL"}},
						"seccompProfile": map[string]any{"type": "RuntimeDefault"},
					},
				},
				map[string]any{"name": "sidecar", "image": "envoyproxy/envoy:v1.30"},
			},
			"volumes": []any{map[string]any{"name": "data", "emptyDir": map[string]any{}}},
		},
	}
}

// WithLongStrings is p with the long strings real Pods have: every image
// referenced by digest (about 100 characters), a 2 KB annotation and a
// container script of 1 KB.
func WithLongStrings(p map[string]any) map[string]any {
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

// SecurityMix is a mix of Pods for the Pod Security set: compliant ones
// and ones failing baseline or restricted checks, half and half.
func SecurityMix() []map[string]any {
	restricted := func(i int) map[string]any {
		p := Pod(i)
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
			pods = append(pods, Pod(i)) // a sidecar without a securityContext
			continue
		}
		pods = append(pods, p)
	}
	return pods
}

// LongStringMix is SecurityMix WithLongStrings.
func LongStringMix() []map[string]any {
	pods := SecurityMix()
	for i, p := range pods {
		pods[i] = WithLongStrings(p)
	}
	return pods
}

// PodSecurityValidatingPolicies loads the Pod Security set of the
// conformance corpus's kyverno-policies folder as ValidatingPolicies:
// every ValidatingPolicy of pod-security-vpol/{baseline,restricted}, as
// bench-admission's vpol mode serves them. clusterPolicies are the files
// of the ClusterPolicies of the same names in pod-security/, one for each
// policy's folder, in the same order. Without the folder the test is
// skipped.
func PodSecurityValidatingPolicies(tb testing.TB, kyvernoPolicies string) (vpols []*policiesv1.ValidatingPolicy, clusterPolicies []string) {
	tb.Helper()
	for _, level := range []string{"baseline", "restricted"} {
		dirs, err := os.ReadDir(filepath.Join(kyvernoPolicies, "pod-security-vpol", level))
		if err != nil {
			tb.Skipf("conformance corpus not available: %v", err)
		}
		for _, d := range dirs {
			if !d.IsDir() {
				continue
			}
			vpols = append(vpols, readValidatingPolicies(tb, filepath.Join(kyvernoPolicies, "pod-security-vpol", level, d.Name(), d.Name()+".yaml"))...)
			clusterPolicies = append(clusterPolicies, filepath.Join(kyvernoPolicies, "pod-security", level, d.Name(), d.Name()+".yaml"))
		}
	}
	return vpols, clusterPolicies
}

// readValidatingPolicies reads the documents of a YAML file as
// ValidatingPolicies, leaving out empty ones.
func readValidatingPolicies(tb testing.TB, file string) []*policiesv1.ValidatingPolicy {
	tb.Helper()
	f, err := os.Open(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []*policiesv1.ValidatingPolicy
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		vp := &policiesv1.ValidatingPolicy{}
		err := dec.Decode(vp)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		if vp.Kind != "" {
			out = append(out, vp)
		}
	}
}
