package gitsync

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// TestReconcileRequestAnnotation: with an hour between polls, only the
// annotation can bring a new commit in; the value handled is echoed in
// status.lastHandledReconcileAt. The earlier spelling still works.
func TestReconcileRequestAnnotation(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
	}{
		{name: "requestedAt", annotation: gitopsv1alpha1.ReconcileRequestAnnotation},
		{name: "legacy spelling", annotation: gitopsv1alpha1.LegacyReconcileRequestAnnotation},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			src := newGitRepo(t)
			name := fmt.Sprintf("request-%d", i)
			first := src.commit(map[string]string{"p.yaml": policy(name, "team")}, nil)
			repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
				r.Spec.Interval = &metav1.Duration{Duration: time.Hour}
			})
			readyAt(t, repo, first)

			second := src.commit(map[string]string{"p.yaml": policy(name, "requested")}, nil)
			value := time.Now().UTC().Format(time.RFC3339Nano)
			r := eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {})
			patch := client.MergeFrom(r.DeepCopy())
			r.Annotations = map[string]string{tt.annotation: value}
			g.Expect(testClient.Patch(t.Context(), r, patch)).To(Succeed())

			got := readyAt(t, repo, second)
			g.Expect(got.Status.LastHandledReconcileAt).To(Equal(value))
			g.Expect(getPolicy(t, name).Spec.Rules[0].Name).To(Equal("require-requested"))
		})
	}
}
