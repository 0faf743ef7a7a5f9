package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/controlplane"
)

// TestPolicyWebhookMatchesEveryServedVersion reads charter's CRDs and
// checks that the policy webhook names every served version of every
// policy, exception, cleanup policy and global context entry resource:
// an object written in kyverno.io/v2beta1 or policies.kyverno.io/v1alpha1
// is checked by /policyvalidate as one written in the hub version is.
func TestPolicyWebhookMatchesEveryServedVersion(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*kyverno.io_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Kyverno CRDs under config/crd/bases: %v", err)
	}
	cfgs, err := Build(nil, resolver, Settings{Target: Target{URL: "https://127.0.0.1:9443"}})
	if err != nil {
		t.Fatal(err)
	}
	rules := cfgs.PolicyValidating.Webhooks[0].Rules
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Spec.Names.Kind == "UpdateRequest" {
			continue // charter's own work items, written by charter
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			checked++
			if !matches(rules, crd.Spec.Group, v.Name, crd.Spec.Names.Plural) {
				t.Errorf("the policy webhook does not match %s/%s %s", crd.Spec.Group, v.Name, crd.Spec.Names.Plural)
			}
		}
	}
	if checked < 30 {
		t.Errorf("only %d served versions checked", checked)
	}
}

func matches(rules []admissionregistrationv1.RuleWithOperations, group, version, resource string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.APIVersions, version) && slices.Contains(r.Resources, resource) &&
			slices.Contains(r.Operations, admissionregistrationv1.Create) && slices.Contains(r.Operations, admissionregistrationv1.Update) {
			return true
		}
	}
	return false
}
