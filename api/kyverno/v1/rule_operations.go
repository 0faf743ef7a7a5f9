package v1

import "slices"

// NamesOperation reports whether any of the rule's match filters names
// the operation explicitly in its operations list. Generate and
// mutate-existing rules act on a DELETE only when they ask for it.
func (r *Rule) NamesOperation(op AdmissionOperation) bool {
	m := &r.MatchResources
	if slices.Contains(m.ResourceDescription.Operations, op) {
		return true
	}
	for _, filters := range [][]ResourceFilter{m.Any, m.All} {
		for i := range filters {
			if slices.Contains(filters[i].ResourceDescription.Operations, op) {
				return true
			}
		}
	}
	return false
}
