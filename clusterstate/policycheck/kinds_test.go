package policycheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/api/versions"
)

// TestKindsCoverEveryServedKind: the table holds every kind charter
// serves (api/versions) but UpdateRequest, which charter writes itself;
// each entry's objects are of their kind's hub type, and Checked judges
// them.
func TestKindsCoverEveryServedKind(t *testing.T) {
	s := runtime.NewScheme()
	if err := versions.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for gvk := range s.AllKnownTypes() {
		if !versions.Served(gvk) || gvk.Kind == kyvernov2.UpdateRequestKind {
			continue
		}
		if _, ok := Lookup(gvk.Group, gvk.Kind); !ok {
			t.Errorf("%s is served but not in the kind table", gvk)
		}
	}
	seen := map[string]bool{}
	for _, k := range table {
		key := k.Group + "/" + k.Kind
		if seen[key] {
			t.Errorf("%s is in the table twice", key)
		}
		seen[key] = true
		obj := k.New()
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil || len(gvks) == 0 || gvks[0].Group != k.Group || gvks[0].Kind != k.Kind {
			t.Errorf("%s: New gives %T, of %v (%v)", key, obj, gvks, err)
		}
		if hub := versions.ToHub(obj); hub != obj {
			t.Errorf("%s: New gives %T, not the hub type", key, obj)
		}
		if !Checked(obj) {
			t.Errorf("%s: Checked does not judge its objects", key)
		}
		if !meta.IsListType(k.NewList()) {
			t.Errorf("%s: NewList gives %T, no list", key, k.NewList())
		}
		if scope := crdScope(t, k); scope != "Namespaced" && k.Namespaced || scope != "Cluster" && !k.Namespaced {
			t.Errorf("%s: Namespaced %v, but its CRD's scope is %q", key, k.Namespaced, scope)
		}
	}
	if got := len(Kinds(RolePolicy)) + len(Kinds(RoleException)) + len(Kinds(RoleCleanup)) + len(Kinds(RoleGlobalContext)); got != len(table) {
		t.Errorf("the roles hold %d kinds, the table %d", got, len(table))
	}
}

// crdScope reads the scope of a kind's CRD from config/crd/bases.
func crdScope(t *testing.T, k Kind) string {
	t.Helper()
	plural := strings.ToLower(k.Plural())
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", k.Group+"_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Scope string `json:"scope"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Scope
}
