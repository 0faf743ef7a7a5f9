package gitsync

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// repositoryEvents lists the events about the PolicyRepository in ns.
func repositoryEvents(g Gomega, ns string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(testClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == gitopsv1alpha1.PolicyRepositoryKind && e.Regarding.Name == "policies" {
			out = append(out, e)
		}
	}
	return out
}

// TestEvents: a new revision, its apply, a prune and a failure each leave
// an event on the PolicyRepository; a failure retried again and again
// leaves one.
func TestEvents(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	first := src.commit(map[string]string{
		"a.yaml": policy("events-a", "team"),
		"b.yaml": policy("events-b", "team"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.RetryInterval = &metav1.Duration{Duration: 200 * time.Millisecond}
	})
	readyAt(t, repo, first)
	g.Eventually(func(g Gomega) {
		g.Expect(repositoryEvents(g, ns)).To(ContainElements(
			And(HaveField("Reason", EventNewRevision), HaveField("Type", corev1.EventTypeNormal), HaveField("Note", ContainSubstring(first))),
			And(HaveField("Reason", EventApplied), HaveField("Note", ContainSubstring("applied revision "+first+": 2 created"))),
		))
	}).WithTimeout(waitTimeout).Should(Succeed())

	second := src.commit(map[string]string{"b.yaml": ""}, nil)
	readyAt(t, repo, second)
	g.Eventually(func(g Gomega) {
		g.Expect(repositoryEvents(g, ns)).To(ContainElement(
			And(HaveField("Reason", EventPruned), HaveField("Note", Equal("pruned ClusterPolicy/events-b")))))
	}).WithTimeout(waitTimeout).Should(Succeed())

	// A revision the API server refuses for now is retried every 200ms.
	third := src.commit(map[string]string{"c.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  namespace: events-no-such-namespace
data: {}
`}, nil)
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAttemptedRevision).To(Equal(third))
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonApplyFailed))
	})
	failed := func(g Gomega) []eventsv1.Event {
		var out []eventsv1.Event
		for _, e := range repositoryEvents(g, ns) {
			if e.Reason == EventFailed {
				out = append(out, e)
			}
		}
		return out
	}
	g.Eventually(failed).WithTimeout(waitTimeout).Should(ConsistOf(And(
		HaveField("Type", corev1.EventTypeWarning),
		HaveField("Action", gitopsv1alpha1.ReasonApplyFailed),
		HaveField("Note", ContainSubstring("c.yaml: ConfigMap/events-no-such-namespace/c")),
	)))
	g.Consistently(func(g Gomega) {
		events := failed(g)
		g.Expect(events).To(HaveLen(1))
		g.Expect(events[0].Series).To(BeNil())
	}).WithTimeout(2 * time.Second).Should(Succeed())
}

// TestPolicyWarnings: a revision holding a policy Kyverno admits with a
// warning (a deprecated operator) applies, as policy admission admits it;
// the warning, naming the file, is a Warning event PolicyWarning and is
// in the Ready message, as kubectl apply would have shown it. A resync of
// the same revision repeats no event.
func TestPolicyWarnings(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	rev := src.commit(map[string]string{"deprecated.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: warned-deprecated-operator
spec:
  background: false
  rules:
  - name: r
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      failureAction: Audit
      deny:
        conditions:
          any:
          - key: "{{request.object.metadata.name}}"
            operator: In
            value: [a]
`}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Interval = &metav1.Duration{Duration: 200 * time.Millisecond}
	})
	got := readyAt(t, repo, rev)
	const warning = "Operator In has been deprecated"
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(And(
		ContainSubstring("1 policy warnings"), ContainSubstring(`deprecated.yaml: ClusterPolicy "warned-deprecated-operator": `+warning)))
	g.Expect(getPolicy(t, "warned-deprecated-operator")).NotTo(BeNil())
	warned := func(g Gomega) []eventsv1.Event {
		var out []eventsv1.Event
		for _, e := range repositoryEvents(g, ns) {
			if e.Reason == EventPolicyWarning {
				out = append(out, e)
			}
		}
		return out
	}
	g.Eventually(warned).WithTimeout(waitTimeout).Should(ConsistOf(And(
		HaveField("Type", corev1.EventTypeWarning),
		HaveField("Note", And(ContainSubstring("revision "+rev), ContainSubstring("deprecated.yaml"), ContainSubstring(warning))))))
	// Resyncs every 200ms of the same revision.
	g.Consistently(warned).WithTimeout(2 * time.Second).Should(HaveLen(1))
}
