package background

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Who writes for a policy. A cluster-scoped policy (ClusterPolicy,
// GeneratingPolicy, MutatingPolicy) is the platform's: its downstream
// objects and patched targets are written with charter's own identity,
// whose role is Kyverno's background-controller role plus the ClusterRoles
// labelled AggregateLabel. A namespaced policy (Policy,
// NamespacedGeneratingPolicy, NamespacedMutatingPolicy) is a tenant's: its
// writes, and the reads that decide them (is the downstream object there,
// and whose), are made as the ServiceAccount Options.PolicyServiceAccount
// of its namespace, impersonated, so Kubernetes RBAC, escalation checks
// included, decides what it may do; a Role granting what that
// ServiceAccount does not hold is refused by the API server. There is no
// fallback to charter's identity: a missing ServiceAccount or a refused
// write fails the rule with a *ForbiddenError naming the ServiceAccount
// and the verb.

// writer returns the client that writes for p.
func (c *Controller) writer(p kyvernov1.PolicyInterface) (dynamic.Interface, error) {
	if p == nil || !p.IsNamespaced() {
		return c.dyn, nil
	}
	return c.impersonated.For(p.GetNamespace())
}

// writeResource is resource for p's writes: the client of a kind's
// objects in a namespace that acts for p (writer).
func (c *Controller) writeResource(p kyvernov1.PolicyInterface, apiVersion, kind, namespace string) (dynamic.ResourceInterface, *meta.RESTMapping, error) {
	_, mapping, err := c.resource(apiVersion, kind, namespace)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := c.writer(p)
	if err != nil {
		return nil, nil, err
	}
	res := dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return res.Namespace(namespace), mapping, nil
	}
	return res, mapping, nil
}
