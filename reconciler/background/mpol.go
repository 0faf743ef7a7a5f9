package background

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/policyid"
)

// A MutatingPolicy with evaluation.mutateExisting (cel-policy-types.md
// §3.3.2) reaches this controller as a ClusterPolicy's mutate-existing
// rule does: its one synthetic rule, named after it
// (MutatingPolicySpec.KyvernoSpec), gets UpdateRequests from admission
// (webhook/updaterequest, loop protection included), and mutateExisting
// carries them out: the engine selects the targets from
// targetMatchConstraints (or matchConstraints) through the Resources
// loader, evaluates each as an UPDATE of itself, and every changed target
// is written with an Update at the resourceVersion it was read at. As
// Kyverno's policy controller does, it also runs when the policy is
// created or changed (and on every resync), for every existing object of
// its matchConstraints' resources that the engine's trigger check (any
// operation, selectors, matchConditions) selects: its synthetic rule has
// mutateExistingOnPolicyUpdate.

// targetInScope refuses a patched target outside a namespaced policy's
// namespace: the engine refuses those already, and the write is where a
// tenant's policy would act on someone else's objects, so it is checked
// again here.
func targetInScope(p kyvernov1.PolicyInterface, target map[string]any) error {
	if p == nil || !p.IsNamespaced() {
		return nil
	}
	u := unstructured.Unstructured{Object: target}
	if ns := u.GetNamespace(); ns != p.GetNamespace() {
		where := "the cluster scope"
		if ns != "" {
			where = "namespace " + ns
		}
		return fmt.Errorf("%s %s of %s: a namespaced policy acts in namespace %s only, not in %s; not written",
			u.GetKind(), objectName(ns, u.GetName()), where, p.GetNamespace(), where)
	}
	return nil
}

// statusObject is an empty object of the kind, namespace and name an
// policyid.Of names, to read and patch its status or address an
// event: a ClusterPolicy or Policy for a bare key, else the
// policies.kyverno.io kind of the background controller's policies.
func statusObject(id string) interface {
	client.Object
	kyvernov1.PolicyInterface
} {
	return policiesv1.PolicyForKind(policyid.Parse(id)).(interface {
		client.Object
		kyvernov1.PolicyInterface
	})
}
