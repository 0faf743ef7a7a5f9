package manifest

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/strict"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/clusterstate/policycheck"
)

// isCELVersion reports whether charter serves kind in the
// policies.kyverno.io apiVersion, as Kyverno 1.19 does (api/versions):
// v1alpha1 (cluster-scoped kinds and PolicyException), v1beta1 and v1
// share one schema, so each decodes into the v1 type.
func isCELVersion(apiVersion, kind string) bool {
	return versions.Served(schema.FromAPIVersionAndKind(apiVersion, kind))
}

// decodeStrictly decodes a document of kind k into its hub type as policy
// admission and the GitOps check decode it: strictly, so a field the
// kind's schema does not know, or one given twice, is refused rather than
// dropped (Kyverno's CLI refuses an unknown field too). A served version
// is decoded as itself and converted (api/versions); a kyverno.io version
// charter does not serve is read as the hub type. The error names the
// document (file and index), the kind and name, and the field. The JSON
// is encoding/json's of the document already decoded from YAML, so it is
// decoded without a second YAML pass (strict.UnmarshalJSON).
func decodeStrictly(d Document, k policycheck.Kind) (client.Object, error) {
	apiVersion, kind := d.TypeMeta()
	data, err := d.JSON()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Where(), err)
	}
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	var obj client.Object
	if versions.Served(gvk) {
		decoded, derr := versions.DecodeJSON(gvk, data)
		if derr == nil {
			obj = decoded.(client.Object)
		}
		err = derr
	} else {
		obj = k.New()
		err = strict.UnmarshalJSON(data, obj)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", d.Where(), kind, documentName(d), err)
	}
	return obj, nil
}

// documentName is metadata.namespace/name of a document, or its name
// alone, for error messages; "(no name)" when it has none.
func documentName(d Document) string {
	obj, _ := d.Value.(map[string]any)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if name == "" {
		name = "(no name)"
	}
	if ns, _ := meta["namespace"].(string); ns != "" {
		return ns + "/" + name
	}
	return name
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

// DecodePolicies sorts documents into the policies and PolicyExceptions
// of the kinds charter serves (policycheck.Kinds: ClusterPolicy, Policy,
// the policies.kyverno.io policies in a version charter serves, and both
// groups' PolicyExceptions), each decoded strictly into its hub type
// (decodeStrictly: an unknown field is an error). A namespaced
// one without a namespace is put in "default".
func DecodePolicies(docs []Document) (*Policies, error) {
	out := &Policies{}
	for _, d := range docs {
		apiVersion, kind := d.TypeMeta()
		group, _, _ := strings.Cut(apiVersion, "/")
		k, evaluated := policycheck.Lookup(group, kind)
		evaluated = evaluated && (k.Role == policycheck.RolePolicy || k.Role == policycheck.RoleException)
		// kyverno.io kinds are read whatever their version; the
		// policies.kyverno.io ones in the versions charter serves only.
		if group == policiesv1.Group && !isCELVersion(apiVersion, kind) {
			evaluated = false
		}
		switch {
		case evaluated:
			obj, err := decodeStrictly(d, k)
			if err != nil {
				return nil, err
			}
			if k.Namespaced && obj.GetNamespace() == "" {
				obj.SetNamespace("default")
			}
			switch o := obj.(type) {
			case kyvernov1.PolicyInterface:
				out.Policies = append(out.Policies, o)
			case *kyvernov2.PolicyException:
				out.Exceptions = append(out.Exceptions, o)
			case *policiesv1.PolicyException:
				out.CELExceptions = append(out.CELExceptions, o)
			}
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
