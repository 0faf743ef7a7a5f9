package reports

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBackgroundScanWebhookConditions: a background scan leaves out a
// policy whose spec.webhookConfiguration.matchConditions do not hold for
// the resource, as Kyverno's engine does: team a's Pod is reported on by
// it, the unlabelled Pod only by the policy without conditions.
func TestBackgroundScanWebhookConditions(t *testing.T) {
	e := startEnv(t)
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports-test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	plain := e.apply("pod.yaml")
	teamA := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "reports-test", Labels: map[string]string{"team": "a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}
	teamA, err := e.cs.CoreV1().Pods("reports-test").Create(e.ctx, teamA, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := e.startController(Options{Admission: NewAdmissionQueue(10)})
	e.apply("require-team.yaml")
	e.apply("team-a-conditioned.yaml")
	e.wantResults("team a's Pod: both policies", "reports-test", string(teamA.UID), "require-team/team-label=pass", "team-a-conditioned/owner=fail")
	// Both Pods were scanned with both policies once nothing is being
	// evaluated any more.
	for before := int64(-1); ; {
		n := c.Stats().Evaluations.Load()
		if n == before {
			break
		}
		before = n
		time.Sleep(time.Second)
	}
	e.wantResults("the unlabelled Pod: the policy without conditions only", "reports-test", string(plain.GetUID()), "require-team/team-label=fail")
}
