package jmespath

import (
	"encoding/json"
	"testing"
)

// BenchmarkSearchCachedQuery measures evaluation of an already compiled
// query, the engine's steady state.
func BenchmarkSearchCachedQuery(b *testing.B) {
	var data any
	if err := json.Unmarshal([]byte(`{"request": {"object": {"spec": {"containers": [
		{"name": "a", "image": "nginx:1.25"}, {"name": "b", "image": "envoy:latest"}, {"name": "c", "image": "redis"}]}}}}`), &data); err != nil {
		b.Fatal(err)
	}
	i := New()
	const expr = "request.object.spec.containers[?ends_with(image, ':latest')].name | length(@)"
	if got, err := i.Search(expr, data); err != nil || got != 1.0 {
		b.Fatalf("Search = %v, %v", got, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := i.Search(expr, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileUncached measures parsing, which the cache avoids.
func BenchmarkCompileUncached(b *testing.B) {
	i := New(WithCacheSize(0))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := i.Compile("request.object.spec.containers[?ends_with(image, ':latest')].name | length(@)"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchPodSecurityQuery measures a query the fast path answers
// (fast.go): disallow-capabilities' deny key over a Pod of three
// containers, none adding capabilities.
func BenchmarkSearchPodSecurityQuery(b *testing.B) {
	var data any
	if err := json.Unmarshal([]byte(`{"request": {"object": {"spec": {"containers": [
		{"name": "a", "image": "nginx:1.25", "securityContext": {"capabilities": {"drop": ["ALL"]}}},
		{"name": "b", "image": "envoy:latest"}, {"name": "c", "image": "redis"}]}}}}`), &data); err != nil {
		b.Fatal(err)
	}
	i := New()
	const expr = "request.object.spec.[ephemeralContainers, initContainers, containers][].securityContext.capabilities.add[]"
	if got, err := i.Search(expr, data); err != nil || len(got.([]any)) != 0 {
		b.Fatalf("Search = %v, %v", got, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := i.Search(expr, data); err != nil {
			b.Fatal(err)
		}
	}
}
