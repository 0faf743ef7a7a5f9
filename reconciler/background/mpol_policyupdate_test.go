package background

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// TestMutatingPolicyRunsOnPolicyChange: a MutatingPolicy with
// evaluation.mutateExisting runs for the triggers that already exist when
// it is created, and again when it is changed, with no admission request
// (Kyverno's policy controller does the same for a MutatingPolicy); a
// NamespacedMutatingPolicy does so for its own namespace's triggers only.
// The trigger's report names the targets a run patched (patched-target).
func TestMutatingPolicyRunsOnPolicyChange(t *testing.T) {
	e := startEnv(t)
	for _, ns := range []string{"mp-one", "mp-two", "mp-tenant"} {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{"roll": "yes"}}})
	}
	// mp-tenant's NamespacedMutatingPolicy writes as mp-tenant's
	// charter-policy, which the tenant lets write ConfigMaps.
	e.grantPolicyServiceAccount("mp-tenant")
	// The triggers exist before the policies.
	trigger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mp-two", Name: "trigger", Labels: map[string]string{"trigger": "yes"}}}
	e.create(trigger)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "mp-tenant", Name: "trigger"}}
	e.create(sa)
	e.startControllerWithReports(Options{})
	e.createCELPolicies("mpol-roll-label.yaml")

	rolled := func(ns, label, want string) func() error {
		return func() error {
			l, err := e.configMapLabels(ns, "settings")
			if err != nil {
				return err
			}
			if l[label] != want {
				return fmt.Errorf("%s/settings labels %v, want %s=%s", ns, l, label, want)
			}
			return nil
		}
	}
	for _, ns := range []string{"mp-one", "mp-two", "mp-tenant"} {
		e.eventually("policy created: "+ns+"/settings rolled", rolled(ns, "rolled", "v2"))
	}
	e.eventually("policy created: the tenant's ConfigMap labelled", rolled("mp-tenant", "tenant", "mp-tenant"))
	for _, ns := range []string{"mp-one", "mp-two"} {
		if l, _ := e.configMapLabels(ns, "settings"); l["tenant"] != "" {
			t.Errorf("the namespaced policy labelled %s/settings", ns)
		}
	}
	patched := func(namespace string, uid types.UID, policy, want string) func() error {
		return func() error {
			got, err := e.reportProperty(namespace, uid, "KyvernoMutatingPolicy", policy, "", "pass", "patched-target")
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("patched-target %q, want %q", got, want)
			}
			return nil
		}
	}
	// Which targets the last run patched depends on the runs before it
	// (the tenant policy writes mp-tenant/settings at the same time);
	// after the change below one run patches all three.
	e.eventually("the trigger's report names patched targets", func() error {
		got, err := e.reportProperty("mp-two", trigger.UID, "KyvernoMutatingPolicy", "mpol-roll-label", "", "pass", "patched-target")
		if err != nil {
			return err
		}
		for _, t := range strings.Split(got, "; ") {
			if !strings.HasPrefix(t, "/v1, Kind=ConfigMap Name=settings Namespace=mp-") {
				return fmt.Errorf("patched-target %q", got)
			}
		}
		return nil
	})
	e.eventually("the tenant trigger's report names its namespace's target", patched("mp-tenant", sa.UID, "mp-tenant/mpol-tenant",
		"/v1, Kind=ConfigMap Name=settings Namespace=mp-tenant"))
	if urs := e.updateRequests(); len(urs) != 0 {
		t.Errorf("policy events made UpdateRequests: %+v", urs)
	}

	// A changed mutation reaches the targets with no new trigger.
	var p policiesv1.MutatingPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "mpol-roll-label"}, &p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Mutations[0].ApplyConfiguration.Expression = "Object{metadata: Object.metadata{labels: {'rolled': 'v3'}}}"
	if err := e.cl.Update(e.ctx, &p); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"mp-one", "mp-two", "mp-tenant"} {
		e.eventually("policy changed: "+ns+"/settings rolled again", rolled(ns, "rolled", "v3"))
	}
	e.eventually("the trigger's report names every target the changed policy patched", patched("mp-two", trigger.UID, "mpol-roll-label",
		"/v1, Kind=ConfigMap Name=settings Namespace=mp-one; /v1, Kind=ConfigMap Name=settings Namespace=mp-tenant; /v1, Kind=ConfigMap Name=settings Namespace=mp-two"))
}
