package gitsync

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// clusterRolesPolicy excludes by clusterRoles, which no CEL kind can see
// (a request carries the user's name and groups, not their roles).
func clusterRolesPolicy(name string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  background: false
  rules:
  - name: admins-only
    match:
      any:
      - resources:
          kinds: [ConfigMap]
    exclude:
      any:
      - clusterRoles: [cluster-admin]
    validate:
      failureAction: Audit
      message: only cluster admins
      deny: {}
`, name)
}

// TestStatusCountsConvertiblePolicies: once a revision applies, the
// repository's status says how many of its ClusterPolicies convert to the
// CEL kinds and names the others with their reason; a later revision is
// counted again.
func TestStatusCountsConvertiblePolicies(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	rev1 := src.commit(map[string]string{
		"conv-a.yaml": policy("conv-a", "team"),
		"conv-b.yaml": clusterRolesPolicy("conv-b"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())

	got := readyAt(t, repo, rev1)
	g.Expect(got.Status.Conversion).To(Equal(&gitopsv1alpha1.ConversionStatus{
		Revision: rev1, Total: 2, Convertible: 1,
		Unconvertible: []gitopsv1alpha1.UnconvertiblePolicy{{
			Name:   "conv-b",
			Reason: "rule admins-only: exclude: roles and clusterRoles are not visible to CEL",
		}},
	}))

	rev2 := src.commit(map[string]string{"conv-b.yaml": policy("conv-b", "owner")}, nil)
	got = readyAt(t, repo, rev2)
	g.Expect(got.Status.Conversion).To(Equal(&gitopsv1alpha1.ConversionStatus{Revision: rev2, Total: 2, Convertible: 2}))
}
