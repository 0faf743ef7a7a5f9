package manifest

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/clusterstate/policycheck"
)

// Objects decodes documents as Kubernetes objects. A List document (kind
// List or *List with an items array) contributes its items. Every object
// must have apiVersion and kind; the error names the document otherwise.
func Objects(docs []Document) ([]*unstructured.Unstructured, error) {
	objs := make([]*unstructured.Unstructured, 0, len(docs))
	for _, d := range docs {
		obj, err := d.Object()
		if err != nil {
			return nil, err
		}
		items, isList := listItems(obj)
		if !isList {
			items = []any{obj}
		}
		for i, item := range items {
			m, ok := item.(map[string]any)
			where := d.Where()
			if isList {
				where = fmt.Sprintf("%s: items[%d]", where, i)
			}
			if !ok {
				return nil, fmt.Errorf("%s: not an object", where)
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GetAPIVersion() == "" || u.GetKind() == "" {
				return nil, fmt.Errorf("%s: missing apiVersion or kind", where)
			}
			objs = append(objs, u)
		}
	}
	return objs, nil
}

func listItems(obj map[string]any) ([]any, bool) {
	kind, _ := obj["kind"].(string)
	if !strings.HasSuffix(kind, "List") {
		return nil, false
	}
	items, ok := obj["items"].([]any)
	return items, ok
}

// DecodeDocument decodes a document into a typed value (non-strict: unknown
// fields are dropped, as the API server prunes them).
func DecodeDocument(d Document, out any) error {
	data, err := d.JSON()
	if err != nil {
		return fmt.Errorf("%s: %w", d.Where(), err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: %w", d.Where(), err)
	}
	return nil
}

// clusterScoped lists the kinds of the built-in APIs that have no
// namespace; the kinds charter serves are added from the kind table
// (policycheck), so this list cannot disagree with it. Any other kind is
// taken to be namespaced, as Kyverno's CLI does.
var clusterScoped = withServedKinds(map[string]bool{
	"APIService":                       true,
	"CertificateSigningRequest":        true,
	"ClusterImagePolicy":               true,
	"ClusterPolicyReport":              true,
	"ClusterRole":                      true,
	"ClusterRoleBinding":               true,
	"ClusterTrustBundle":               true,
	"ComponentStatus":                  true,
	"CSIDriver":                        true,
	"CSINode":                          true,
	"CustomResourceDefinition":         true,
	"DeviceClass":                      true,
	"FlowSchema":                       true,
	"IngressClass":                     true,
	"MutatingAdmissionPolicy":          true,
	"MutatingAdmissionPolicyBinding":   true,
	"MutatingWebhookConfiguration":     true,
	"Namespace":                        true,
	"Node":                             true,
	"PersistentVolume":                 true,
	"PodSecurityPolicy":                true,
	"PriorityClass":                    true,
	"PriorityLevelConfiguration":       true,
	"ResourceSlice":                    true,
	"RuntimeClass":                     true,
	"SelfSubjectAccessReview":          true,
	"SelfSubjectReview":                true,
	"SelfSubjectRulesReview":           true,
	"StorageClass":                     true,
	"StorageVersion":                   true,
	"SubjectAccessReview":              true,
	"TokenReview":                      true,
	"ValidatingAdmissionPolicy":        true,
	"ValidatingAdmissionPolicyBinding": true,
	"ValidatingWebhookConfiguration":   true,
	"VolumeAttachment":                 true,
})

// withServedKinds adds to m every cluster-wide kind of the kind table.
func withServedKinds(m map[string]bool) map[string]bool {
	for _, k := range policycheck.All() {
		if !k.Namespaced {
			m[k.Kind] = true
		}
	}
	return m
}

// IsClusterScoped reports whether objects of kind have no namespace.
func IsClusterScoped(kind string) bool { return clusterScoped[kind] }

// DefaultNamespace gives a namespaced object without a namespace the
// namespace "default", as kubectl and Kyverno's CLI do.
func DefaultNamespace(u *unstructured.Unstructured) {
	if u.GetNamespace() == "" && !IsClusterScoped(u.GetKind()) {
		u.SetNamespace("default")
	}
}
