package manifest

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/versions"
)

// isCELVersion reports whether charter serves kind in the
// policies.kyverno.io apiVersion, as Kyverno 1.19 does (api/versions):
// v1alpha1 (cluster-scoped kinds and PolicyException), v1beta1 and v1
// share one schema, so each decodes into the v1 type.
func isCELVersion(apiVersion, kind string) bool {
	return versions.Served(schema.FromAPIVersionAndKind(apiVersion, kind))
}

// decodeCEL decodes a policies.kyverno.io document of any served version
// into the v1 type.
func decodeCEL(d Document, into interface{ SetGroupVersionKind(schema.GroupVersionKind) }) error {
	if err := DecodeDocument(d, into); err != nil {
		return err
	}
	_, kind := d.TypeMeta()
	into.SetGroupVersionKind(policiesv1.GroupVersion.WithKind(kind))
	return nil
}

// Policies is what a set of policy documents holds.
type Policies struct {
	Policies   []kyvernov1.PolicyInterface
	Exceptions []*kyvernov2.PolicyException
	// CELExceptions are policies.kyverno.io PolicyExceptions.
	CELExceptions []*policiesv1.PolicyException
	// Unsupported maps the name of each policy of a kind charter cannot
	// evaluate (ValidatingAdmissionPolicy, policies.kyverno.io CEL
	// policies, ...) to its apiVersion and kind.
	Unsupported map[string]string
	// Others are documents that are not policies at all (where: kind).
	Others []string
}

// DecodePolicies sorts documents into kyverno.io ClusterPolicies, Policies
// and PolicyExceptions. A Policy without a namespace is put in "default".
func DecodePolicies(docs []Document) (*Policies, error) {
	out := &Policies{}
	for _, d := range docs {
		apiVersion, kind := d.TypeMeta()
		group, _, _ := strings.Cut(apiVersion, "/")
		switch {
		case group == "kyverno.io" && kind == "ClusterPolicy":
			p := &kyvernov1.ClusterPolicy{}
			if err := DecodeDocument(d, p); err != nil {
				return nil, err
			}
			out.Policies = append(out.Policies, p)
		case group == "kyverno.io" && kind == "Policy":
			p := &kyvernov1.Policy{}
			if err := DecodeDocument(d, p); err != nil {
				return nil, err
			}
			if p.Namespace == "" {
				p.Namespace = "default"
			}
			out.Policies = append(out.Policies, p)
		case group == "kyverno.io" && kind == "PolicyException":
			ex := &kyvernov2.PolicyException{}
			if err := DecodeDocument(d, ex); err != nil {
				return nil, err
			}
			if ex.Namespace == "" {
				ex.Namespace = "default"
			}
			out.Exceptions = append(out.Exceptions, ex)
		case group == policiesv1.Group && isCELVersion(apiVersion, kind) && kind == policiesv1.ValidatingPolicyKind:
			p := &policiesv1.ValidatingPolicy{}
			if err := decodeCEL(d, p); err != nil {
				return nil, err
			}
			out.Policies = append(out.Policies, p)
		case group == policiesv1.Group && isCELVersion(apiVersion, kind) && kind == policiesv1.NamespacedValidatingPolicyKind:
			p := &policiesv1.NamespacedValidatingPolicy{}
			if err := decodeCEL(d, p); err != nil {
				return nil, err
			}
			if p.Namespace == "" {
				p.Namespace = "default"
			}
			out.Policies = append(out.Policies, p)
		case group == policiesv1.Group && isCELVersion(apiVersion, kind) && kind == policiesv1.MutatingPolicyKind:
			p := &policiesv1.MutatingPolicy{}
			if err := decodeCEL(d, p); err != nil {
				return nil, err
			}
			out.Policies = append(out.Policies, p)
		case group == policiesv1.Group && isCELVersion(apiVersion, kind) && kind == policiesv1.NamespacedMutatingPolicyKind:
			p := &policiesv1.NamespacedMutatingPolicy{}
			if err := decodeCEL(d, p); err != nil {
				return nil, err
			}
			if p.Namespace == "" {
				p.Namespace = "default"
			}
			out.Policies = append(out.Policies, p)
		case group == policiesv1.Group && isCELVersion(apiVersion, kind) && kind == policiesv1.GeneratingPolicyKind:
			p := &policiesv1.GeneratingPolicy{}
			if err := decodeCEL(d, p); err != nil {
				return nil, err
			}
			out.Policies = append(out.Policies, p)
		case group == policiesv1.Group && isCELVersion(apiVersion, kind) && kind == policiesv1.NamespacedGeneratingPolicyKind:
			p := &policiesv1.NamespacedGeneratingPolicy{}
			if err := decodeCEL(d, p); err != nil {
				return nil, err
			}
			if p.Namespace == "" {
				p.Namespace = "default"
			}
			out.Policies = append(out.Policies, p)
		case group == policiesv1.Group && isCELVersion(apiVersion, kind) && kind == policiesv1.ImageValidatingPolicyKind:
			p := &policiesv1.ImageValidatingPolicy{}
			if err := decodeCEL(d, p); err != nil {
				return nil, err
			}
			out.Policies = append(out.Policies, p)
		case group == policiesv1.Group && isCELVersion(apiVersion, kind) && kind == policiesv1.NamespacedImageValidatingPolicyKind:
			p := &policiesv1.NamespacedImageValidatingPolicy{}
			if err := decodeCEL(d, p); err != nil {
				return nil, err
			}
			if p.Namespace == "" {
				p.Namespace = "default"
			}
			out.Policies = append(out.Policies, p)
		case group == policiesv1.Group && isCELVersion(apiVersion, kind) && kind == policiesv1.PolicyExceptionKind:
			ex := &policiesv1.PolicyException{}
			if err := decodeCEL(d, ex); err != nil {
				return nil, err
			}
			if ex.Namespace == "" {
				ex.Namespace = "default"
			}
			out.CELExceptions = append(out.CELExceptions, ex)
		case apiVersion == "" || kind == "":
			return nil, fmt.Errorf("%s: missing apiVersion or kind", d.Where())
		case isPolicyKind(group, kind):
			obj, err := d.Object()
			if err != nil {
				return nil, err
			}
			if out.Unsupported == nil {
				out.Unsupported = map[string]string{}
			}
			out.Unsupported[(&unstructured.Unstructured{Object: obj}).GetName()] = apiVersion + " " + kind
		default:
			out.Others = append(out.Others, d.Where()+": "+kind)
		}
	}
	return out, nil
}

// isPolicyKind reports policy kinds charter does not evaluate yet.
func isPolicyKind(group, kind string) bool {
	switch group {
	case "admissionregistration.k8s.io":
		return strings.HasSuffix(kind, "AdmissionPolicy") || strings.HasSuffix(kind, "AdmissionPolicyBinding")
	case "policies.kyverno.io", "kyverno.io":
		return true
	}
	return false
}
