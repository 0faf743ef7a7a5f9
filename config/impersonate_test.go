package config

import (
	"slices"
	"strings"
	"testing"
)

// tenantActors are the controllers that act for a namespaced policy as the
// ServiceAccount --namespaced-policy-service-account of its namespace,
// impersonated, and why. Each runs in a Deployment of its own, so each
// needs the flag and the RBAC to impersonate that ServiceAccount (and to
// read it: every impersonated request first checks it exists) itself; one
// Deployment's grant does not help another's.
var tenantActors = map[string]string{
	"admission":  "resource.Post of a namespaced CEL policy at admission; loop protection of the background controller's writes",
	"reports":    "resource.Post of a namespaced CEL policy in background scans",
	"background": "generate and mutate-existing writes, resource.Post",
	"cleanup":    "CleanupPolicy and NamespacedDeletingPolicy lists and deletes, resource.Post",
}

// TestEveryTenantActorMayImpersonateThePolicyServiceAccount: in a split
// install (config/default, and the chart with the default or another
// ServiceAccount name), every Deployment that acts for namespaced policies
// is told the ServiceAccount's name and may impersonate exactly it and get
// it, cluster-wide. Without it a NamespacedValidatingPolicy's resource.Post
// fails at admission (charter-admission may not impersonate), while the
// same policy works in charter dev, where one process holds every right.
func TestEveryTenantActorMayImpersonateThePolicyServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		name, serviceAccount string
		render               func(t *testing.T) *rendered
	}{
		{"config/default", "charter-policy", render},
		{"chart", "charter-policy", func(t *testing.T) *rendered { return collect(t, renderChart(t, "charter", nil).Objects) }},
		{"chart with features.namespacedPolicies.serviceAccount", "tenant-policies", func(t *testing.T) *rendered {
			return collect(t, renderChart(t, "charter", map[string]any{"features": map[string]any{"namespacedPolicies": map[string]any{"serviceAccount": "tenant-policies"}}}).Objects)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.render(t)
			seen := map[string]bool{}
			for _, d := range r.deployments {
				args := d.Spec.Template.Spec.Containers[0].Args
				var controller string
				for _, a := range args {
					if v, ok := strings.CutPrefix(a, "--controllers="); ok {
						controller = v
					}
				}
				why, ok := tenantActors[controller]
				if !ok {
					continue
				}
				seen[controller] = true
				if flag := "--namespaced-policy-service-account=" + tc.serviceAccount; !slices.Contains(args, flag) {
					t.Errorf("Deployment %s (%s) does not run with %s: %v", d.Name, why, flag, args)
				}
				account := d.Namespace + "/" + d.Spec.Template.Spec.ServiceAccountName
				held := r.permissions(t, account)
				for _, p := range []string{
					permission(cluster, "", "serviceaccounts{"+tc.serviceAccount+"}", "impersonate"),
					permission(cluster, "", "serviceaccounts", "get"),
				} {
					if !held[p] {
						t.Errorf("Deployment %s runs as %s, which lacks %q (%s)", d.Name, account, p, why)
					}
				}
				for p := range held {
					if strings.HasSuffix(p, " impersonate") && p != permission(cluster, "", "serviceaccounts{"+tc.serviceAccount+"}", "impersonate") {
						t.Errorf("Deployment %s runs as %s, which may impersonate more than the namespaced-policy ServiceAccount: %q", d.Name, account, p)
					}
				}
			}
			for c := range tenantActors {
				if !seen[c] {
					t.Errorf("no Deployment runs --controllers=%s", c)
				}
			}
		})
	}
}
