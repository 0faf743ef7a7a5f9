package reports

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestBackgroundReportsParams: a background scan reads validate.cel params
// from the param kind's informer, as admission does, and a param's
// change, update or delete, rescans at once (no full rescan) the resource
// types of the policies that read its kind, and only those: the
// Namespaces another policy scans are not evaluated again, and an object
// of the kind that no paramRef names rescans nothing.
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
	c, _ := e.startController(Options{Admission: NewAdmissionQueue(10)})
	e.apply("namespace-owner.yaml")
	e.apply("params-max-containers.yaml")
	e.wantResults("the Pod's report with the param's limit of 0", "reports-test", string(pod.GetUID()), "params-max-containers/max-containers=fail")
	ns, err := e.cs.CoreV1().Namespaces().Get(e.ctx, "reports-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.wantResults("the namespace's report", "", string(ns.UID), "namespace-owner/owner-label=fail")
	settled := func() int64 {
		// Nothing is evaluated for a while: the scans are done.
		for {
			before := c.Stats().Evaluations.Load()
			time.Sleep(time.Second)
			if n := c.Stats().Evaluations.Load(); n == before {
				return n
			}
		}
	}
	evaluated := settled()

	// A ConfigMap no paramRef names is no param: its changes rescan
	// nothing (ConfigMaps change all the time in a cluster).
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "reports-test"}, Data: map[string]string{"maxContainers": "5"}}
	if other, err = e.cs.CoreV1().ConfigMaps("reports-test").Create(e.ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other.Data["maxContainers"] = "6"
	if _, err := e.cs.CoreV1().ConfigMaps("reports-test").Update(e.ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // well past the policy cache's debounce
	if n := settled() - evaluated; n != 0 {
		t.Errorf("changes of a ConfigMap no paramRef names evaluated %d resources, want 0", n)
	}
	// Nor do they count as a change of the params policy when another
	// policy changes: only that policy's Namespaces are evaluated again.
	policies := e.dyn.Resource(kyvernov1.GroupVersion.WithResource("clusterpolicies"))
	owner, err := policies.Get(e.ctx, "namespace-owner", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner.SetAnnotations(map[string]string{"edited": "yes"})
	if _, err := policies.Update(e.ctx, owner, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	namespaces, err := e.cs.CoreV1().Namespaces().List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if n := settled() - evaluated; n != int64(len(namespaces.Items)) {
		t.Errorf("an edit of namespace-owner evaluated %d resources, want %d (its Namespaces; not the params policy's Pod)", n, len(namespaces.Items))
	}
	evaluated = settled()

	limits.Data["maxContainers"] = "1"
	if _, err := e.cs.CoreV1().ConfigMaps("reports-test").Update(e.ctx, limits, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantResults("the param's update: limit of 1", "reports-test", string(pod.GetUID()), "params-max-containers/max-containers=pass")
	if n := settled() - evaluated; n != 1 {
		t.Errorf("the param's update evaluated %d resources, want 1 (the Pod; the Namespaces are not the param's policy's)", n)
	}

	if err := e.cs.CoreV1().ConfigMaps("reports-test").Delete(e.ctx, "limits", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the param's deletion: no params, parameterNotFoundAction Deny", func() error {
		got, _, err := e.results("reports-test", string(pod.GetUID()))
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0] != "params-max-containers/max-containers=error" && got[0] != "params-max-containers/max-containers=fail" {
			return fmt.Errorf("results %v", got)
		}
		return nil
	})
}
