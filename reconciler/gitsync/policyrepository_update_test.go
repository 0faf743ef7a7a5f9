package gitsync

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// generatePolicy is a ClusterPolicy whose synchronized generate rule makes
// a ConfigMap in each Namespace labelled selector=true.
func generatePolicy(name, selector string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %[1]s
spec:
  rules:
  - name: marker
    match:
      any:
      - resources:
          kinds: [Namespace]
          selector: {matchLabels: {%[2]s: "true"}}
    generate:
      synchronize: true
      apiVersion: v1
      kind: ConfigMap
      name: %[1]s
      namespace: "{{ request.object.metadata.name }}"
      data: {data: {by: %[1]s}}
`, name, selector)
}

// TestImmutableGenerateChangeStallsBeforeApplying: a revision that changes
// the match of an installed policy's synchronized generate rule, which
// policy admission refuses (generate.CheckUpdate), stalls naming the file,
// the rule and the field, and applies none of its objects, not even those
// before it; the fix applies.
func TestImmutableGenerateChangeStallsBeforeApplying(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	good := src.commit(map[string]string{
		"policies/a-update.yaml":   policy("update-a", "team"),
		"policies/b-generate.yaml": generatePolicy("update-b", "marked"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, good)

	bad := src.commit(map[string]string{
		"policies/a-update.yaml":   policy("update-a", "changed"),
		"policies/b-generate.yaml": generatePolicy("update-b", "tagged"),
	}, nil)
	got := stalledAt(t, repo, bad)
	ready := condition(got, gitopsv1alpha1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonValidationFailed))
	g.Expect(ready.Message).To(ContainSubstring(`policies/b-generate.yaml: ClusterPolicy "update-b": spec.rules[0] (generate rule "marker"): ` +
		`changes of immutable fields of a rule spec in a generate rule is disallowed: match changed`))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(good))
	g.Expect(getPolicy(t, "update-a").Spec.Rules[0].Name).To(Equal("require-team"))

	// The rule's match back as installed: the rest of the revision applies.
	fixed := src.commit(map[string]string{"policies/b-generate.yaml": generatePolicy("update-b", "marked")}, nil)
	readyAt(t, repo, fixed)
	g.Expect(getPolicy(t, "update-a").Spec.Rules[0].Name).To(Equal("require-changed"))
}
