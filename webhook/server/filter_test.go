package server

import "testing"

// TestDefaultFiltersSkipCharterReports: charter's own report writes never
// reach policies (evaluating them would report on reports), in either
// report API; a kind of another group that is named Report is evaluated.
func TestDefaultFiltersSkipCharterReports(t *testing.T) {
	filters := DefaultResourceFilters("charter")
	tests := []struct {
		group, kind, namespace string
		want                   bool
	}{
		{"wgpolicyk8s.io", "PolicyReport", "shop", true},
		{"wgpolicyk8s.io", "ClusterPolicyReport", "", true},
		{"openreports.io", "Report", "shop", true},
		{"openreports.io", "ClusterReport", "", true},
		{"reports.example.com", "Report", "shop", false},
		{"reports.example.com", "ClusterReport", "", false},
		{"", "Pod", "shop", false},
	}
	for _, tt := range tests {
		if got := filtered(filters, tt.group, tt.kind, "", tt.namespace, "r"); got != tt.want {
			t.Errorf("%s %s in %q filtered = %v, want %v", tt.group, tt.kind, tt.namespace, got, tt.want)
		}
	}
}
