package v1

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MatchResources selects the resources and requests a rule applies to (under
// match) or skips (under exclude).
//
// Either Any or All holds a list of filters; the older form puts one filter's
// UserInfo and ResourceDescription directly in the block. Kyverno forbids
// mixing the two forms; the engine reports that, the type accepts both.
type MatchResources struct {
	// Any matches when at least one of the filters matches.
	// +optional
	Any ResourceFilters `json:"any,omitempty"`

	// All matches when every filter matches.
	// +optional
	All ResourceFilters `json:"all,omitempty"`

	// UserInfo of the older, single-filter form.
	// +optional
	UserInfo `json:",inline"`

	// ResourceDescription of the older, single-filter form.
	// +optional
	ResourceDescription ResourceDescription `json:"resources,omitzero"`
}

// IsEmpty reports whether the block selects nothing at all.
func (m *MatchResources) IsEmpty() bool {
	return m == nil || (len(m.Any) == 0 && len(m.All) == 0 && m.UserInfo.IsEmpty() && m.ResourceDescription.IsEmpty())
}

// Filters returns the filters of the block and whether they combine with
// "all" semantics. The older inline form is returned as a single filter.
func (m *MatchResources) Filters() (filters ResourceFilters, all bool) {
	switch {
	case m == nil:
		return nil, false
	case len(m.All) > 0:
		return m.All, true
	case len(m.Any) > 0:
		return m.Any, false
	case m.UserInfo.IsEmpty() && m.ResourceDescription.IsEmpty():
		return nil, false
	default:
		return ResourceFilters{{UserInfo: m.UserInfo, ResourceDescription: m.ResourceDescription}}, true
	}
}

// GetKinds returns every kind named anywhere in the block.
func (m *MatchResources) GetKinds() []string {
	if m == nil {
		return nil
	}
	kinds := append([]string(nil), m.ResourceDescription.Kinds...)
	for _, f := range m.Any {
		kinds = append(kinds, f.ResourceDescription.Kinds...)
	}
	for _, f := range m.All {
		kinds = append(kinds, f.ResourceDescription.Kinds...)
	}
	return kinds
}

// ResourceFilters is a list of ResourceFilter.
type ResourceFilters []ResourceFilter

// ResourceFilter selects resources by what they are and who sends the request.
type ResourceFilter struct {
	// UserInfo selects requests by the requesting user.
	// +optional
	UserInfo `json:",inline"`

	// ResourceDescription selects resources by kind, name, namespace, labels
	// and annotations.
	// +optional
	ResourceDescription ResourceDescription `json:"resources,omitzero"`
}

// IsEmpty reports whether the filter selects nothing. It and its parts'
// IsEmpty take pointers: matching asks on every rule of every request, and
// the filter is too large to copy there.
func (f *ResourceFilter) IsEmpty() bool {
	return f.UserInfo.IsEmpty() && f.ResourceDescription.IsEmpty()
}

// AdmissionOperation is an admission request operation.
// +kubebuilder:validation:Enum=CREATE;CONNECT;UPDATE;DELETE
type AdmissionOperation string

// Admission operations a ResourceDescription can select.
const (
	Create  AdmissionOperation = "CREATE"
	Update  AdmissionOperation = "UPDATE"
	Delete  AdmissionOperation = "DELETE"
	Connect AdmissionOperation = "CONNECT"
)

// ResourceDescription selects resources. Names, namespaces and annotation
// values may hold the wildcards * and ?.
type ResourceDescription struct {
	// Kinds is a list of kinds, as Kind, Group/Kind, Group/Version/Kind or
	// Kind/Subresource; * matches any.
	// +optional
	Kinds []string `json:"kinds,omitempty"`

	// Name is a single resource name. Deprecated: use Names.
	// +optional
	Name string `json:"name,omitempty"`

	// Names is a list of resource names.
	// +optional
	Names []string `json:"names,omitempty"`

	// Namespaces is a list of namespace names.
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// Annotations the resource must carry, values may hold wildcards.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Selector is a label selector on the resource.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// NamespaceSelector is a label selector on the resource's namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Operations are the admission operations to select; empty selects all.
	// +optional
	Operations []AdmissionOperation `json:"operations,omitempty"`
}

// IsEmpty reports whether the description selects nothing.
func (r *ResourceDescription) IsEmpty() bool {
	return len(r.Kinds) == 0 && r.Name == "" && len(r.Names) == 0 && len(r.Namespaces) == 0 &&
		len(r.Annotations) == 0 && r.Selector == nil && r.NamespaceSelector == nil && len(r.Operations) == 0
}

// UserInfo selects admission requests by the requesting user.
type UserInfo struct {
	// Roles is a list of namespaced role names ("namespace:name").
	// +optional
	Roles []string `json:"roles,omitempty"`

	// ClusterRoles is a list of cluster role names.
	// +optional
	ClusterRoles []string `json:"clusterRoles,omitempty"`

	// Subjects is a list of users, groups and service accounts.
	// +optional
	Subjects []rbacv1.Subject `json:"subjects,omitempty"`
}

// IsEmpty reports whether no user criteria are set.
func (u *UserInfo) IsEmpty() bool {
	return len(u.Roles) == 0 && len(u.ClusterRoles) == 0 && len(u.Subjects) == 0
}
