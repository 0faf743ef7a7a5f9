package v2

import (
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// MatchResources selects resources with a list of filters, any or all of
// which must match. Unlike kyverno.io/v1 it has no inline single-filter form.
type MatchResources struct {
	// Any matches when at least one of the filters matches.
	// +optional
	Any kyvernov1.ResourceFilters `json:"any,omitempty"`

	// All matches when every filter matches.
	// +optional
	All kyvernov1.ResourceFilters `json:"all,omitempty"`
}

// IsEmpty reports whether no filter is set.
func (m *MatchResources) IsEmpty() bool {
	return m == nil || (len(m.Any) == 0 && len(m.All) == 0)
}

// V1 returns the same selection as a kyverno.io/v1 MatchResources, so one
// matcher serves policies, exceptions and cleanup policies.
func (m *MatchResources) V1() kyvernov1.MatchResources {
	if m == nil {
		return kyvernov1.MatchResources{}
	}
	return kyvernov1.MatchResources{Any: m.Any, All: m.All}
}
