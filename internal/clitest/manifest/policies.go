package manifest

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// Policies is what a set of policy documents holds.
type Policies struct {
	Policies   []kyvernov1.PolicyInterface
	Exceptions []*kyvernov2.PolicyException
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
