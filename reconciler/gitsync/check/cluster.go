package check

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// withRevisionCRDs is the cluster as it will be once the revision is
// applied: what it serves now, and the kinds the revision's
// CustomResourceDefinitions define, so a revision that brings a CRD and
// a policy on its kind is judged as the API server will see them. The
// rest of what policy admission asks the cluster (who writes a
// ClusterPolicy's generate and mutate-existing targets, who deletes what a
// ClusterCleanupPolicy matches, who reads what rules match for reports,
// which GlobalContextEntries are Ready, whether validate.cel expressions
// type-check) it asks the cluster it wraps, when that one can answer:
// policycheck.InCluster makes the same checks as at /policyvalidate.
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

// BackgroundWriter implements policycheck.WriterCluster.
func (c withRevisionCRDs) BackgroundWriter() *policycheck.Writer {
	if wc, ok := c.cluster.(policycheck.WriterCluster); ok {
		return wc.BackgroundWriter()
	}
	return nil
}

// AdmissionReader implements policycheck.AdmissionCluster.
func (c withRevisionCRDs) AdmissionReader() *policycheck.Writer {
	if ac, ok := c.cluster.(policycheck.AdmissionCluster); ok {
		return ac.AdmissionReader()
	}
	return nil
}

// CleanupDeleter implements policycheck.DeleterCluster.
func (c withRevisionCRDs) CleanupDeleter() *policycheck.Writer {
	if dc, ok := c.cluster.(policycheck.DeleterCluster); ok {
		return dc.CleanupDeleter()
	}
	return nil
}

// ReportsReader implements policycheck.ReaderCluster.
func (c withRevisionCRDs) ReportsReader() *policycheck.Writer {
	if rc, ok := c.cluster.(policycheck.ReaderCluster); ok {
		return rc.ReportsReader()
	}
	return nil
}

// GlobalContextEntries implements policycheck.GlobalContextCluster.
func (c withRevisionCRDs) GlobalContextEntries() policycheck.GlobalContextEntries {
	if gc, ok := c.cluster.(policycheck.GlobalContextCluster); ok {
		return gc.GlobalContextEntries()
	}
	return nil
}

// CELTypeWarnings implements policycheck.CELTypeCluster. A kind only the
// revision's CRDs define has no schema on the API server yet, so it is
// not type-checked, as policy admission would not check it either before
// the CRD is served.
func (c withRevisionCRDs) CELTypeWarnings(p kyvernov1.PolicyInterface) ([]string, error) {
	if cc, ok := c.cluster.(policycheck.CELTypeCluster); ok {
		return cc.CELTypeWarnings(p)
	}
	return nil, nil
}
