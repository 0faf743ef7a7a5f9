package reports

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestBackgroundScanMutatingPolicy: a MutatingPolicy's background scan
// reports the ConfigMaps that existed before it as Kyverno does
// (cel-policy-types.md §3.3.2; Kyverno's e2e mutating-policies/reporting):
// fail "mutation is not applied" for one without the label, pass
// "success" for one that carries it, skip where its matchConditions do
// not hold; once the label is added, the failing result turns to pass.
func TestBackgroundScanMutatingPolicy(t *testing.T) {
	e := startEnv(t)
	uids := map[string]string{}
	for _, cm := range []struct {
		namespace, name string
		labels          map[string]string
	}{
		{"mpol-scan", "unlabelled", nil},
		{"mpol-scan", "labelled", map[string]string{"team": "platform"}},
		{"mpol-other", "elsewhere", nil},
	} {
		if _, err := e.cs.CoreV1().Namespaces().Get(e.ctx, cm.namespace, metav1.GetOptions{}); err != nil {
			if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cm.namespace}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		obj, err := e.cs.CoreV1().ConfigMaps(cm.namespace).Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.name, Labels: cm.labels}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[cm.name] = string(obj.GetUID())
	}
	e.startController(Options{})
	e.apply("mpol-team-label.yaml")

	rep := e.wantResults("the unlabelled ConfigMap's result", "mpol-scan", uids["unlabelled"], "team-label/=fail")
	results, _, _ := unstructured.NestedSlice(rep.Object, "results")
	if r := results[0].(map[string]any); r["message"] != "mutation is not applied" || r["source"] != "KyvernoMutatingPolicy" {
		t.Errorf("result %v, want message \"mutation is not applied\" and source KyvernoMutatingPolicy", r)
	}
	e.wantResults("the labelled ConfigMap's result", "mpol-scan", uids["labelled"], "team-label/=pass")
	e.wantResults("the result where matchConditions do not hold", "mpol-other", uids["elsewhere"], "team-label/=skip")

	cm, err := e.cs.CoreV1().ConfigMaps("mpol-scan").Get(e.ctx, "unlabelled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels = map[string]string{"team": "platform"}
	if _, err := e.cs.CoreV1().ConfigMaps("mpol-scan").Update(e.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantResults("the result once the ConfigMap carries the label", "mpol-scan", uids["unlabelled"], "team-label/=pass")
}
