package crdschema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/api/internal/roundtrip"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/api/strict"
	"sigs.k8s.io/yaml"
)

// schemas loads every generated CRD, keyed by "group/version Kind".
func schemas(t *testing.T) (map[string]*Schema, string) {
	t.Helper()
	root, err := roundtrip.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under config/crd/bases (run make manifests): %v", err)
	}
	out := map[string]*Schema{}
	for _, f := range files {
		loaded, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range loaded {
			out[s.Group+"/"+s.Version+" "+s.Kind] = s
		}
	}
	return out, root
}

func decode(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestCorpusAgainstCRDs checks that the API server would accept every policy
// and exception of the conformance corpus unchanged: no validation error and
// no field pruned.
func TestCorpusAgainstCRDs(t *testing.T) {
	all, _ := schemas(t)
	dir, err := roundtrip.ConformanceDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("conformance corpus not found at %s", dir)
	}
	docs, err := roundtrip.ReadDocuments(dir)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, doc := range docs {
		key := doc.APIVersion + " " + doc.Kind
		switch key {
		case "kyverno.io/v1 ClusterPolicy", "kyverno.io/v1 Policy",
			"kyverno.io/v2 PolicyException", "kyverno.io/v2beta1 PolicyException":
		default:
			continue
		}
		obj := decode(t, doc.YAML)
		if _, hasSpec := obj["spec"]; !hasSpec {
			continue // a chainsaw assertion fragment (status only), not an object to create
		}
		// Status is written through the status subresource, never with the
		// object (chainsaw assertion files carry both).
		delete(obj, "status")
		checked++
		pruned, errs := all[key].Check(obj)
		if len(pruned) > 0 {
			t.Errorf("%s: the API server would prune %v", doc, pruned)
		}
		if len(errs) > 0 {
			t.Errorf("%s: the API server would refuse it: %v", doc, errs.ToAggregate())
		}
	}
	t.Logf("checked %d corpus objects against the CRD schemas", checked)
	if checked < 100 {
		t.Fatalf("checked only %d objects under %s", checked, dir)
	}
}

// TestSamples checks every sample against its CRD and decodes it strictly
// into its Go type.
func TestSamples(t *testing.T) {
	all, root := schemas(t)
	types := map[string]func() any{
		"kyverno.io/v1 ClusterPolicy":                  func() any { return &kyvernov1.ClusterPolicy{} },
		"kyverno.io/v1 Policy":                         func() any { return &kyvernov1.Policy{} },
		"kyverno.io/v2 PolicyException":                func() any { return &kyvernov2.PolicyException{} },
		"kyverno.io/v2 CleanupPolicy":                  func() any { return &kyvernov2.CleanupPolicy{} },
		"kyverno.io/v2 ClusterCleanupPolicy":           func() any { return &kyvernov2.ClusterCleanupPolicy{} },
		"kyverno.io/v2 UpdateRequest":                  func() any { return &kyvernov2.UpdateRequest{} },
		"wgpolicyk8s.io/v1alpha2 PolicyReport":         func() any { return &policyreportv1alpha2.PolicyReport{} },
		"wgpolicyk8s.io/v1alpha2 ClusterPolicyReport":  func() any { return &policyreportv1alpha2.ClusterPolicyReport{} },
		"gitops.charter.dev/v1alpha1 PolicyRepository": func() any { return &gitopsv1alpha1.PolicyRepository{} },
	}
	docs, err := roundtrip.ReadDocuments(filepath.Join(root, "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, doc := range docs {
		if doc.Kind == "Kustomization" {
			continue
		}
		key := doc.APIVersion + " " + doc.Kind
		newObj, ok := types[key]
		if !ok {
			t.Errorf("%s: no Go type for %s", doc, key)
			continue
		}
		seen[key] = true
		// Strict decoding only: a round trip would rewrite durations such as
		// "5m" as "5m0s", which is metav1.Duration's canonical form.
		if err := strict.Unmarshal(doc.YAML, newObj()); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
		pruned, errs := all[key].Check(decode(t, doc.YAML))
		if len(pruned) > 0 || len(errs) > 0 {
			t.Errorf("%s: pruned %v, errors %v", doc, pruned, errs.ToAggregate())
		}
	}
	for key := range types {
		if !seen[key] {
			t.Errorf("no sample of %s under config/samples", key)
		}
	}
}

// TestCRDsRefuseBadPolicies checks that the schemas are strict where they
// should be and free-form where they must be.
func TestCRDsRefuseBadPolicies(t *testing.T) {
	all, _ := schemas(t)
	cpol := all["kyverno.io/v1 ClusterPolicy"]
	base := `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
`
	tests := []struct {
		name       string
		extra      string
		wantPruned string
		wantErr    string
	}{
		{name: "valid", extra: "    validate: {pattern: {spec: {=(anything): null, x: [1, 'a', {}]}}}\n"},
		{name: "misspelt spec field", extra: "  validationFailureActon: Enforce\n", wantPruned: "spec.validationFailureActon"},
		{name: "misspelt rule field", extra: "    validat: {}\n", wantPruned: "spec.rules[0].validat"},
		{name: "misspelt field under resources", extra: "    exclude: {resources: {namespace: [a]}}\n", wantPruned: "spec.rules[0].exclude.resources.namespace"},
		{name: "unknown failure action", extra: "    validate: {failureAction: Block, deny: {}}\n", wantErr: "failureAction"},
		{name: "operators inside free-form preconditions are the engine's to check", extra: "    validate: {deny: {}}\n    preconditions: {all: [{key: a, operator: Equal, value: a}]}\n"},
		{name: "scalar condition value", extra: "    validate:\n      deny:\n        conditions:\n          any: [{key: '{{a}}', operator: Equals, value: 3}]\n"},
		{name: "rule name too long", extra: "  - name: " + strings.Repeat("x", 64) + "\n    validate: {deny: {}}\n", wantErr: "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pruned, errs := cpol.Check(decode(t, []byte(base+tt.extra)))
			got := strings.Join(pruned, ",")
			if got != tt.wantPruned {
				t.Errorf("pruned = %q, want %q", got, tt.wantPruned)
			}
			if tt.wantErr == "" && len(errs) > 0 {
				t.Errorf("errors = %v, want none", errs.ToAggregate())
			}
			if tt.wantErr != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.wantErr)) {
				t.Errorf("errors = %v, want one about %q", errs.ToAggregate(), tt.wantErr)
			}
		})
	}
}
