package gitsync

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// TestBadCleanupScheduleStallsNamingFileAndField (#32): the pre-apply
// check parses a ClusterCleanupPolicy's schedule as the cleanup controller
// will, so a revision with a schedule that is no cron expression applies
// nothing and is Stalled, naming the file and the field.
func TestBadCleanupScheduleStallsNamingFileAndField(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	bad := src.commit(map[string]string{
		"policies/schedule-ok.yaml": policy("schedule-ok", "team"),
		"cleanup/stale.yaml": `apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata:
  name: stale-configmaps
spec:
  schedule: "61 * * * *"
  match:
    any:
    - resources:
        kinds: [ConfigMap]
`,
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	got := stalledAt(t, repo, bad)
	ready := condition(got, gitopsv1alpha1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonValidationFailed))
	g.Expect(ready.Message).To(ContainSubstring(`cleanup/stale.yaml: ClusterCleanupPolicy "stale-configmaps": spec.schedule: invalid schedule "61 * * * *"`))
	g.Expect(got.Status.LastAppliedRevision).To(BeEmpty())
	g.Expect(getPolicy(t, "schedule-ok")).To(BeNil())
}
