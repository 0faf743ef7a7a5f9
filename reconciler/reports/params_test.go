package reports

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBackgroundReportsParams: a background scan reads validate.cel params
// from the param kind's informer, as admission does, and a full rescan
// sees a param's new data.
func TestBackgroundReportsParams(t *testing.T) {
	e := startEnv(t)
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports-test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	limits := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "reports-test"}, Data: map[string]string{"maxContainers": "0"}}
	limits, err := e.cs.CoreV1().ConfigMaps("reports-test").Create(e.ctx, limits, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := e.apply("pod.yaml")
	c, _ := e.startController(Options{Admission: NewAdmissionQueue(10), PolicyDebounce: 100 * time.Millisecond})
	e.apply("params-max-containers.yaml")
	e.wantResults("the Pod's report with the param's limit of 0", "reports-test", string(pod.GetUID()), "params-max-containers/max-containers=fail")

	limits.Data["maxContainers"] = "1"
	if _, err := e.cs.CoreV1().ConfigMaps("reports-test").Update(e.ctx, limits, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("a rescan with the param's limit of 1", func() error {
		if err := c.FullRescan(e.ctx); err != nil {
			return err
		}
		got, _, err := e.results("reports-test", string(pod.GetUID()))
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0] != "params-max-containers/max-containers=pass" {
			return fmt.Errorf("results %v", got)
		}
		return nil
	})
}
