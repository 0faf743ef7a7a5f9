package policycheck

import (
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// readyEntries holds the names of the Ready entries.
type readyEntries []string

func (r readyEntries) EntryReady(name string) bool { return slices.Contains(r, name) }

// TestGlobalContextWarnings: one warning per referenced name whose entry
// is not Ready, in Kyverno's words; a projection is looked up by its
// entry, a name with variables not at all.
func TestGlobalContextWarnings(t *testing.T) {
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(`
metadata: {name: g}
spec:
  rules:
  - name: a
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - {name: hosts, globalReference: {name: registries.hosts}}
    - {name: missing, globalReference: {name: missing}}
    - {name: again, globalReference: {name: missing, jmesPath: "length(@)"}}
    - {name: dynamic, globalReference: {name: "{{request.object.metadata.name}}"}}
    validate: {pattern: {metadata: {name: "?*"}}}
`), &p); err != nil {
		t.Fatal(err)
	}
	got := GlobalContextWarnings(&p, readyEntries{"registries"})
	want := []string{"Global context entry missing does not exist or is not ready"}
	if !slices.Equal(got, want) {
		t.Fatalf("warnings %q, want %q", got, want)
	}
}
