package gitsync

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// pollRarelyRetryOften gives a repository an hour between polls and a
// second between retries: what reaches the cluster within the tests'
// timeouts came through a retry.
func pollRarelyRetryOften(r *gitopsv1alpha1.PolicyRepository) {
	r.Spec.Interval = &metav1.Duration{Duration: time.Hour}
	r.Spec.RetryInterval = &metav1.Duration{Duration: time.Second}
}

// TestNewerRevisionPreemptsAStalledOne: a broken revision is not tried
// again, but the remote is still asked at the retry interval, so the fix
// applies as soon as it is pushed rather than at the next interval.
func TestNewerRevisionPreemptsAStalledOne(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	broken := src.commit(map[string]string{"p.yaml": brokenPolicy("preempt-stalled")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), pollRarelyRetryOften)
	stalledAt(t, repo, broken)
	g.Expect(getPolicy(t, "preempt-stalled")).To(BeNil())
	// Let a few polls find the broken revision unchanged first.
	time.Sleep(2500 * time.Millisecond)

	fixed := src.commit(map[string]string{"p.yaml": policy("preempt-stalled", "team")}, nil)
	readyAt(t, repo, fixed)
	g.Expect(getPolicy(t, "preempt-stalled")).NotTo(BeNil())
}

// TestNewerRevisionPreemptsRetriesOfAFailingOne: a revision the API server
// refuses for now (its Policy's namespace does not exist) is retried, each
// retry asking the remote again, so a newer revision replaces it.
func TestNewerRevisionPreemptsRetriesOfAFailingOne(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	failing := src.commit(map[string]string{
		"p.yaml": policy("preempt-retry", "team"),
		"namespaced.yaml": `apiVersion: kyverno.io/v1
kind: Policy
metadata:
  name: in-missing-namespace
  namespace: preempt-no-such-namespace
spec:
  rules:
  - name: r
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      message: m
      pattern:
        metadata:
          name: "?*"
`,
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), pollRarelyRetryOften)
	got := eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAttemptedRevision).To(Equal(failing))
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonApplyFailed))
	})
	g.Expect(condition(got, gitopsv1alpha1.ConditionReconciling)).To(HaveField("Reason", reasonProgressingWithRetry))
	g.Expect(condition(got, gitopsv1alpha1.ConditionStalled).Status).To(BeEquivalentTo("Absent"))
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring("namespaced.yaml: Policy/preempt-no-such-namespace/in-missing-namespace"))
	// All or nothing: the valid policy next to it was not applied either.
	g.Expect(getPolicy(t, "preempt-retry")).To(BeNil())

	fixed := src.commit(map[string]string{"namespaced.yaml": ""}, nil)
	readyAt(t, repo, fixed)
	g.Expect(getPolicy(t, "preempt-retry")).NotTo(BeNil())
}

// TestKindServedLaterRecoversWithoutACommit: an object whose kind the API
// server does not serve yet is retried, not stalled; once its CRD is
// installed (by someone else) the same revision applies.
func TestKindServedLaterRecoversWithoutACommit(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	group := "retry-" + ns + ".example.com"
	src := newGitRepo(t)
	rev := src.commit(map[string]string{
		"widget.yaml": fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: %s\nspec:\n  size: 3\n", group, ns),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), pollRarelyRetryOften)
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAttemptedRevision).To(Equal(rev))
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonApplyFailed))
		g.Expect(condition(r, gitopsv1alpha1.ConditionStalled).Status).To(BeEquivalentTo("Absent"))
	})

	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
	g.Expect(testClient.Create(t.Context(), crd)).To(Succeed())
	t.Cleanup(func() { _ = testClient.Delete(t.Context(), crd) })

	readyAt(t, repo, rev)
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"})
	g.Expect(testClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "w"}, w)).To(Succeed())
}
