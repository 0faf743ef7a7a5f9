package background

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestMutateExistingThroughSubresource: a MutatingPolicy whose target rule
// names pods/resize patches its target through that subresource, as
// Kyverno's mutating-policies/existing/resize expects: the Pod's CPU
// request is raised. The API server refuses a resources change written to
// the Pod itself, and charter, matching the target as a Pod rather than
// as pods/resize, patched nothing.
func TestMutateExistingThroughSubresource(t *testing.T) {
	e := startEnv(t)
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "resize"}})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "resize", Name: "resize-me"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			}}}}}
	e.create(pod)
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.createCELPolicies("mpol-resize.yaml")
	e.admit(kyvernov1.Create, pod, nil)
	e.eventually("the Pod's CPU request raised through pods/resize", func() error {
		var p corev1.Pod
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "resize", Name: "resize-me"}, &p); err != nil {
			return err
		}
		if got := p.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "200m" {
			return fmt.Errorf("cpu request %s", got)
		}
		return nil
	})
}
