package versions

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// hubs are the versions charter's code works with, by group.
var hubs = map[string][]string{
	"kyverno.io":          {kyvernov1.GroupVersion.Version, kyvernov2.GroupVersion.Version, kyvernov2alpha1.GroupVersion.Version},
	"policies.kyverno.io": {policiesv1.GroupVersion.Version},
}

// TestEveryVersionConvertsToItsHub decodes an object of every served kind
// and version, with a spec field set, and checks it comes out as the hub
// type of its kind with the field kept.
func TestEveryVersionConvertsToItsHub(t *testing.T) {
	n := 0
	for gvk := range scheme.AllKnownTypes() {
		if _, ours := hubs[gvk.Group]; !ours || !Served(gvk) {
			continue
		}
		n++
		doc := map[string]any{
			"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
			"metadata": map[string]any{"name": "x", "namespace": "ns", "labels": map[string]any{"a": "b"}},
		}
		data, _ := json.Marshal(doc)
		obj, err := Decode(gvk, data)
		if err != nil {
			t.Errorf("%s: %v", gvk, err)
			continue
		}
		if _, stillSpoke := obj.(Converter); stillSpoke {
			t.Errorf("%s: Decode returned %T, which is not a hub type", gvk, obj)
		}
		got := obj.GetObjectKind().GroupVersionKind()
		if got.Group != gvk.Group || got.Kind != gvk.Kind || !contains(hubs[gvk.Group], got.Version) {
			t.Errorf("%s: converted to %s, want a hub version of %s %s", gvk, got, gvk.Group, gvk.Kind)
		}
		if hubType, ok := scheme.AllKnownTypes()[got]; !ok || reflect.TypeOf(obj).Elem() != hubType {
			t.Errorf("%s: converted to %T, the scheme's %s is %v", gvk, obj, got, hubType)
		}
		meta, ok := obj.(interface{ GetLabels() map[string]string })
		if !ok || meta.GetLabels()["a"] != "b" {
			t.Errorf("%s: the labels were lost converting to %T", gvk, obj)
		}
	}
	if n < 30 {
		t.Errorf("only %d served kinds and versions found", n)
	}
}

func TestDecodeRefusesWhatIsNotServed(t *testing.T) {
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "policies.kyverno.io", Version: "v1alpha1", Kind: "NamespacedValidatingPolicy"},
		{Group: "policies.kyverno.io", Version: "v2", Kind: "ValidatingPolicy"},
		{Group: "kyverno.io", Version: "v2", Kind: "ClusterPolicy"},
		{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicyList"},
	} {
		_, err := Decode(gvk, []byte(`{}`))
		if err == nil || !strings.Contains(err.Error(), "not served") {
			t.Errorf("%s: err = %v, want not served", gvk, err)
		}
	}
}

func TestDecodeIsStrict(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "policies.kyverno.io", Version: "v1alpha1", Kind: "ValidatingPolicy"}
	_, err := Decode(gvk, []byte(`{"apiVersion":"policies.kyverno.io/v1alpha1","kind":"ValidatingPolicy","metadata":{"name":"x"},"spec":{"validationz":[]}}`))
	if err == nil || !strings.Contains(err.Error(), "spec.validationz") {
		t.Errorf("err = %v, want an unknown field spec.validationz", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
