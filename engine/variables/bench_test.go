package variables

import (
	"encoding/json"
	"testing"

	"github.com/charter-dev/charter/engine/jmespath"
)

const benchPod = `{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "web-{{request.object.metadata.name}}", "namespace": "{{request.namespace}}",
    "labels": {"app": "{{request.object.metadata.labels.app}}", "tier": "frontend", "team": "payments"},
    "annotations": {"owner": "{{ request.object.metadata.annotations.owner || 'nobody' }}", "x": "y"}},
  "spec": {"serviceAccountName": "default", "restartPolicy": "Always",
    "containers": [
      {"name": "app", "image": "{{ images.containers.app.reference }}", "ports": [{"containerPort": 8080}],
       "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
       "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
      {"name": "sidecar", "image": "envoy:1.30", "args": ["--a", "--b", "--c"]}
    ],
    "volumes": [{"name": "data", "emptyDir": {}}]}
}`

const benchContext = `{
  "request": {"namespace": "prod", "object": {"metadata": {"name": "web", "labels": {"app": "shop"}, "annotations": {}}}},
  "images": {"containers": {"app": {"reference": "ghcr.io/org/app:v1"}}}
}`

func benchDocs(b *testing.B, doc, ctx string) (any, Resolver) {
	var d, c any
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal([]byte(ctx), &c); err != nil {
		b.Fatal(err)
	}
	i := jmespath.New()
	return d, ResolverFunc(func(expr string) (any, error) { return i.Search(expr, c) })
}

// BenchmarkSubstitutePod substitutes 5 variables in a Pod-sized document.
func BenchmarkSubstitutePod(b *testing.B) {
	doc, r := benchDocs(b, benchPod, benchContext)
	if got := len(Find(benchPod)); got != 5 {
		b.Fatalf("benchmark document has %d variables, want 5", got)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Substitute(doc, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubstituteNoVariables is the common case: a pattern with nothing
// to substitute.
func BenchmarkSubstituteNoVariables(b *testing.B) {
	doc, r := benchDocs(b, `{"spec": {"containers": [{"image": "!*:latest", "name": "?*"}], "hostNetwork": false}}`, benchContext)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Substitute(doc, r); err != nil {
			b.Fatal(err)
		}
	}
}
