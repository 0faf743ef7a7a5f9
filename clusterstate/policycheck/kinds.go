package policycheck

import (
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// Role is what charter does with objects of a kind.
type Role int

const (
	// RolePolicy: a policy compiled into the PolicySets (admission,
	// reports, background, the CLI).
	RolePolicy Role = iota
	// RoleException: a PolicyException of either group, bound to the
	// PolicySets.
	RoleException
	// RoleCleanup: a cleanup policy the cleanup controller runs on its
	// schedule.
	RoleCleanup
	// RoleGlobalContext: a GlobalContextEntry.
	RoleGlobalContext
)

// Kind is one kind of Kyverno's APIs that charter serves, as its hub type
// (api/versions decodes every served version to it).
type Kind struct {
	Group, Kind string
	// Namespaced is true for the kinds whose objects live in a
	// namespace.
	Namespaced bool
	Role       Role
	// New returns an empty object of the hub type; NewList an empty list
	// of them.
	New     func() client.Object
	NewList func() client.ObjectList
	// check is Object for the kind's objects.
	check func(client.Object) (Result, error)
}

// Plural is the kind's plural, for messages ("listing Policies").
func (k Kind) Plural() string {
	if n := len(k.Kind); n > 0 && k.Kind[n-1] == 'y' {
		return k.Kind[:n-1] + "ies"
	}
	return k.Kind + "s"
}

// table is every kind charter serves, in the order charter lists them:
// kyverno.io's policies first, then the policies.kyverno.io ones, each
// cluster-wide kind before its namespaced variant. The informers of the
// policy cache, policy admission, the GitOps pre-apply check and the CLI
// read their kinds here.
var table = []Kind{
	{Group: kyvernov1.GroupVersion.Group, Kind: kyvernov1.ClusterPolicyKind, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &kyvernov1.ClusterPolicy{} }, NewList: func() client.ObjectList { return &kyvernov1.ClusterPolicyList{} }},
	{Group: kyvernov1.GroupVersion.Group, Kind: kyvernov1.PolicyKind, Namespaced: true, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &kyvernov1.Policy{} }, NewList: func() client.ObjectList { return &kyvernov1.PolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.ValidatingPolicyKind, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &policiesv1.ValidatingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.ValidatingPolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.NamespacedValidatingPolicyKind, Namespaced: true, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &policiesv1.NamespacedValidatingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.NamespacedValidatingPolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.GeneratingPolicyKind, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &policiesv1.GeneratingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.GeneratingPolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.NamespacedGeneratingPolicyKind, Namespaced: true, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &policiesv1.NamespacedGeneratingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.NamespacedGeneratingPolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.MutatingPolicyKind, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &policiesv1.MutatingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.MutatingPolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.NamespacedMutatingPolicyKind, Namespaced: true, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &policiesv1.NamespacedMutatingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.NamespacedMutatingPolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.ImageValidatingPolicyKind, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &policiesv1.ImageValidatingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.ImageValidatingPolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.NamespacedImageValidatingPolicyKind, Namespaced: true, Role: RolePolicy, check: checkPolicy,
		New: func() client.Object { return &policiesv1.NamespacedImageValidatingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.NamespacedImageValidatingPolicyList{} }},
	{Group: kyvernov2.GroupVersion.Group, Kind: kyvernov2.PolicyExceptionKind, Namespaced: true, Role: RoleException, check: checkException,
		New: func() client.Object { return &kyvernov2.PolicyException{} }, NewList: func() client.ObjectList { return &kyvernov2.PolicyExceptionList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.PolicyExceptionKind, Namespaced: true, Role: RoleException, check: checkCELException,
		New: func() client.Object { return &policiesv1.PolicyException{} }, NewList: func() client.ObjectList { return &policiesv1.PolicyExceptionList{} }},
	{Group: kyvernov2.GroupVersion.Group, Kind: kyvernov2.ClusterCleanupPolicyKind, Role: RoleCleanup, check: checkCleanup,
		New: func() client.Object { return &kyvernov2.ClusterCleanupPolicy{} }, NewList: func() client.ObjectList { return &kyvernov2.ClusterCleanupPolicyList{} }},
	{Group: kyvernov2.GroupVersion.Group, Kind: kyvernov2.CleanupPolicyKind, Namespaced: true, Role: RoleCleanup, check: checkCleanup,
		New: func() client.Object { return &kyvernov2.CleanupPolicy{} }, NewList: func() client.ObjectList { return &kyvernov2.CleanupPolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.DeletingPolicyKind, Role: RoleCleanup, check: checkCleanup,
		New: func() client.Object { return &policiesv1.DeletingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.DeletingPolicyList{} }},
	{Group: policiesv1.Group, Kind: policiesv1.NamespacedDeletingPolicyKind, Namespaced: true, Role: RoleCleanup, check: checkCleanup,
		New: func() client.Object { return &policiesv1.NamespacedDeletingPolicy{} }, NewList: func() client.ObjectList { return &policiesv1.NamespacedDeletingPolicyList{} }},
	{Group: kyvernov2alpha1.GroupVersion.Group, Kind: kyvernov2alpha1.GlobalContextEntryKind, Role: RoleGlobalContext, check: checkGlobalContext,
		New: func() client.Object { return &kyvernov2alpha1.GlobalContextEntry{} }, NewList: func() client.ObjectList { return &kyvernov2alpha1.GlobalContextEntryList{} }},
}

// byType indexes the table by hub type, for Object and Checked.
var byType = func() map[reflect.Type]int {
	m := make(map[reflect.Type]int, len(table))
	for i, k := range table {
		m[reflect.TypeOf(k.New())] = i
	}
	return m
}()

// kindOf returns the kind of a hub object.
func kindOf(obj runtime.Object) (Kind, bool) {
	i, ok := byType[reflect.TypeOf(obj)]
	if !ok {
		return Kind{}, false
	}
	return table[i], true
}

// All returns every kind of the table, in its order.
func All() []Kind { return slices.Clone(table) }

// Kinds returns the kinds of a role, in the table's order.
func Kinds(role Role) []Kind {
	var out []Kind
	for _, k := range table {
		if k.Role == role {
			out = append(out, k)
		}
	}
	return out
}

// Lookup returns the kind of a group, whatever the version.
func Lookup(group, kind string) (Kind, bool) {
	for _, k := range table {
		if k.Group == group && k.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}
