package admission

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// mpolRequestManifests: a MutatingPolicy that reads the request's objects
// as Kyverno's CEL policies may (request.object in a matchCondition,
// request.oldObject and oldObject in variables) and rewrites with
// cel-go's regex library (regex.replace), as Kyverno's environment has
// it. charter refused it as not compiling.
const mpolRequestManifests = `
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: track-version}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: versions}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  variables:
  - name: previous
    expression: "request.oldObject == null ? 'none' : request.oldObject.data.?version.orValue('none')"
  - name: oldLabel
    expression: "oldObject == null ? '' : oldObject.metadata.?labels.?release.orValue('')"
  matchConditions:
  - name: has-version
    expression: "has(request.object.data) && 'version' in request.object.data"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {
          "release": regex.replace(object.data.version, '[^0-9a-z]', '-'),
          "previous": regex.replace(variables.previous, '[^0-9a-z]', '-'),
          "was": variables.oldLabel == '' ? 'unset' : string(variables.oldLabel)
        }}}
`

// TestMutatingPolicyReadsRequestObjects: on the real API server, the
// policy above is admitted and Ready, and what it stores shows that
// request.object, request.oldObject, oldObject and regex.replace were
// evaluated: on CREATE the old object is null, on UPDATE it is the stored
// version; a ConfigMap without data.version is left alone.
func TestMutatingPolicyReadsRequestObjects(t *testing.T) {
	f := startAdmission(t, withNamespaces("versions"))
	ctx, cl := f.ctx, f.client
	f.installReady(t, mpolRequestManifests)

	labels := func(name string) map[string]string {
		t.Helper()
		var cm corev1.ConfigMap
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "versions", Name: name}, &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Labels
	}
	var cm *corev1.ConfigMap
	eventually(t, "ConfigMap created and labelled", 30*time.Second, func() error {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "versions", Name: "app"}, Data: map[string]string{"version": "1.2.3"}}
		if err := cl.Create(ctx, cm); err != nil {
			return err
		}
		if cm.Labels["release"] == "1-2-3" {
			return nil
		}
		// Served once the policy's webhook rule is registered.
		_ = cl.Delete(ctx, cm)
		return errNotYet("ConfigMap created unlabelled")
	})
	if l := labels("app"); l["previous"] != "none" || l["was"] != "unset" {
		t.Errorf("on CREATE: labels %v, want previous=none, was=unset", l)
	}

	cm.Data["version"] = "2.0_rc1"
	if err := cl.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if l := labels("app"); l["release"] != "2-0-rc1" || l["previous"] != "1-2-3" || l["was"] != "1-2-3" {
		t.Errorf("on UPDATE: labels %v, want release=2-0-rc1, previous=1-2-3, was=1-2-3", l)
	}

	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "versions", Name: "plain"}, Data: map[string]string{"other": "x"}}
	if err := cl.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if l := labels("plain"); len(l) != 0 {
		t.Errorf("a ConfigMap without data.version got labels %v", l)
	}
}
