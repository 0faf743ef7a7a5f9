package v1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// UpdateRequestPolicyKind is the kind of the policy an UpdateRequest
// names: for Kyverno's cel-generate and cel-mutate requests a
// GeneratingPolicy or a MutatingPolicy (their Namespaced kinds for a
// "namespace/name" key), "" for a ClusterPolicy's or Policy's request.
// The kind keeps apart the requests of policies of one name.
func UpdateRequestPolicyKind(spec *kyvernov2.UpdateRequestSpec) string {
	namespaced := strings.Contains(spec.Policy, "/")
	switch {
	case spec.Type == kyvernov2.CELGenerate && namespaced:
		return NamespacedGeneratingPolicyKind
	case spec.Type == kyvernov2.CELGenerate:
		return GeneratingPolicyKind
	case spec.Type == kyvernov2.CELMutate && namespaced:
		return NamespacedMutatingPolicyKind
	case spec.Type == kyvernov2.CELMutate:
		return MutatingPolicyKind
	}
	return ""
}

// PolicyForKind returns an empty policy of the kind, named by key ("name"
// or "namespace/name"), with its TypeMeta set: enough to address an event
// or a status patch. Kinds other than this group's GeneratingPolicy and
// MutatingPolicy kinds give kyvernov1.PolicyForKey's ClusterPolicy or
// Policy.
func PolicyForKind(kind, key string) kyvernov1.PolicyInterface {
	ns, name, namespaced := strings.Cut(key, "/")
	if !namespaced {
		ns, name = "", key
	}
	tm := metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: kind}
	om := metav1.ObjectMeta{Namespace: ns, Name: name}
	switch kind {
	case GeneratingPolicyKind:
		return &GeneratingPolicy{TypeMeta: tm, ObjectMeta: om}
	case NamespacedGeneratingPolicyKind:
		return &NamespacedGeneratingPolicy{TypeMeta: tm, ObjectMeta: om}
	case MutatingPolicyKind:
		return &MutatingPolicy{TypeMeta: tm, ObjectMeta: om}
	case NamespacedMutatingPolicyKind:
		return &NamespacedMutatingPolicy{TypeMeta: tm, ObjectMeta: om}
	}
	return kyvernov1.PolicyForKey(key)
}
