package main

import (
	"strings"
	"testing"
)

// TestServeLeases: each leader-elected controller of a Deployment that runs
// it alone (config/manager, charts/charter) holds exactly one Lease, named
// for it, and never shares one with the manager's election.
func TestServeLeases(t *testing.T) {
	for _, tc := range []struct {
		controllers string
		id          string
		manager     bool   // the manager elects on the id's Lease
		own         string // the controller's own Lease, if it has one
	}{
		{"admission", "charter", true, ""},
		{"reports", "charter-reports", true, ""},
		{"gitsync", "charter-gitsync", true, ""},
		{"background", "charter-background", false, "charter-background"},
		{"cleanup", "charter-cleanup", false, "charter-cleanup"},
		// One process running several (charter dev, the e2e specs).
		{"admission,background,cleanup", "charter", true, "charter-background charter-cleanup"},
	} {
		t.Run(tc.controllers, func(t *testing.T) {
			controllers := strings.Split(tc.controllers, ",")
			if got := managerElects(controllers); got != tc.manager {
				t.Errorf("managerElects(%v) = %v, want %v", controllers, got, tc.manager)
			}
			var own []string
			for _, c := range controllers {
				if c == controllerBackground || c == controllerCleanup {
					own = append(own, ownLease(tc.id, c))
				}
			}
			if got := strings.Join(own, " "); got != tc.own {
				t.Errorf("own Leases %q, want %q", got, tc.own)
			}
			if tc.manager && strings.Contains(" "+tc.own+" ", " "+tc.id+" ") {
				t.Errorf("the manager and a controller both elect on %s", tc.id)
			}
		})
	}
}
