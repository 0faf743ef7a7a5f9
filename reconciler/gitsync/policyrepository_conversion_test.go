package gitsync

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// podSecurityPolicy holds a podSecurity rule, which the CEL kinds cannot
// express.
func podSecurityPolicy(name string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  background: false
  rules:
  - name: baseline
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      failureAction: Audit
      podSecurity:
        level: baseline
        version: latest
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
		"conv-b.yaml": podSecurityPolicy("conv-b"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())

	got := readyAt(t, repo, rev1)
	g.Expect(got.Status.Conversion).To(Equal(&gitopsv1alpha1.ConversionStatus{
		Revision: rev1, Total: 2, Convertible: 1,
		Unconvertible: []gitopsv1alpha1.UnconvertiblePolicy{{
			Name:   "conv-b",
			Reason: "rule baseline: validate.podSecurity: the CEL kinds have no Pod Security Standards check",
		}},
	}))

	rev2 := src.commit(map[string]string{"conv-b.yaml": policy("conv-b", "owner")}, nil)
	got = readyAt(t, repo, rev2)
	g.Expect(got.Status.Conversion).To(Equal(&gitopsv1alpha1.ConversionStatus{Revision: rev2, Total: 2, Convertible: 2}))
}
