package check

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// withRevisionCRDs is the cluster as it will be once the revision is
// applied: what it serves now, and the kinds the revision's
// CustomResourceDefinitions define, so a revision that brings a CRD and
// a policy on its kind is judged as the API server will see them.
type withRevisionCRDs struct {
	cluster policycheck.Cluster
	defined []policycheck.ServedKind
}

func (c withRevisionCRDs) Resolve(sel match.KindSelector) ([]policycheck.ServedKind, error) {
	var out []policycheck.ServedKind
	for _, k := range c.defined {
		if policycheck.Matches(sel, k) {
			out = append(out, k)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	return c.cluster.Resolve(sel)
}

// revisionCRDKinds are the kinds, with their status and scale
// subresources, that the revision's CustomResourceDefinitions serve.
func revisionCRDKinds(objs []build.Object) []policycheck.ServedKind {
	var out []policycheck.ServedKind
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if gvk.Group != "apiextensions.k8s.io" || gvk.Kind != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			version, _ := v.(map[string]any)
			name, _ := version["name"].(string)
			if served, _ := version["served"].(bool); !served || name == "" {
				continue
			}
			k := policycheck.ServedKind{Group: group, Version: name, Kind: kind, Resource: plural, Namespaced: scope != "Cluster"}
			out = append(out, k)
			subresources, _ := version["subresources"].(map[string]any)
			for _, sub := range []string{"status", "scale"} {
				if _, ok := subresources[sub]; ok {
					s := k
					s.Subresource = sub
					out = append(out, s)
				}
			}
		}
	}
	return out
}
