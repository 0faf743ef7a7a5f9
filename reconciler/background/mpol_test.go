package background

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

func (e *env) configMapLabels(ns, name string) (map[string]string, error) {
	var cm corev1.ConfigMap
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
		return nil, err
	}
	return cm.Labels, nil
}

// TestMutatingPolicyMutateExisting drives MutatingPolicies with
// evaluation.mutateExisting through admission's UpdateRequests and the
// background controller on a real API server: the targets
// targetMatchConstraints and targetMatchConditions select, in every
// namespace, get the ApplyConfiguration and the JSONPatch (written at the
// resourceVersion read, so the UpdateRequest completes and is deleted); a
// NamespacedMutatingPolicy patches its own namespace's targets only (its
// refusal of cluster-scoped targets is the engine's, tested there).
func TestMutatingPolicyMutateExisting(t *testing.T) {
	e := startEnv(t)
	for _, ns := range []string{"mp-one", "mp-two", "mp-tenant"} {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"roll": "yes"}}})
		e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{"roll": "yes"}}})
	}
	// mp-tenant's NamespacedMutatingPolicy writes as mp-tenant's
	// charter-policy, which the tenant lets write ConfigMaps.
	e.grantPolicyServiceAccount("mp-tenant")
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mp-one", Name: "frozen", Labels: map[string]string{"roll": "yes", "frozen": "true"}}})
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mp-two", Name: "unselected"}})
	c, _ := e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.createCELPolicies("mpol-roll-label.yaml")

	trigger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mp-one", Name: "trigger", Labels: map[string]string{"trigger": "yes"}}}
	e.create(trigger)
	e.admit(kyvernov1.Create, trigger, nil)
	for _, ns := range []string{"mp-one", "mp-two", "mp-tenant"} {
		e.eventually("ConfigMap "+ns+"/settings rolled", func() error {
			l, err := e.configMapLabels(ns, "settings")
			if err != nil {
				return err
			}
			if l["rolled"] != "v2" || l["jsonpatched"] != "yes" {
				return fmt.Errorf("labels %v", l)
			}
			return nil
		})
	}
	e.eventually("the UpdateRequest completed and deleted", func() error {
		for _, ur := range e.updateRequests() {
			if ur.Spec.Policy == "mpol-roll-label" {
				return fmt.Errorf("UpdateRequest %s %s %q", ur.Name, ur.Status.State, ur.Status.Message)
			}
		}
		return nil
	})
	for _, cm := range [][2]string{{"mp-one", "frozen"}, {"mp-two", "unselected"}, {"mp-one", "trigger"}} {
		if l, err := e.configMapLabels(cm[0], cm[1]); err != nil || l["rolled"] != "" {
			t.Errorf("ConfigMap %s/%s mutated (labels %v, err %v): targetMatchConditions or objectSelector ignored", cm[0], cm[1], l, err)
		}
	}
	if c.Stats().Completed.Load() == 0 {
		t.Error("no UpdateRequest completed")
	}

	// The namespaced policy: its namespace's ConfigMap only.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "mp-tenant", Name: "trigger"}}
	e.create(sa)
	e.admit(kyvernov1.Create, sa, nil)
	e.eventually("the tenant's ConfigMap labelled", func() error {
		l, err := e.configMapLabels("mp-tenant", "settings")
		if err != nil {
			return err
		}
		if l["tenant"] != "mp-tenant" {
			return fmt.Errorf("labels %v", l)
		}
		return nil
	})
	e.eventually("the tenant's UpdateRequest completed and deleted", func() error {
		for _, ur := range e.updateRequests() {
			if ur.Spec.Policy == "mp-tenant/mpol-tenant" {
				return fmt.Errorf("UpdateRequest %s %s %q", ur.Name, ur.Status.State, ur.Status.Message)
			}
		}
		return nil
	})
	for _, ns := range []string{"mp-one", "mp-two"} {
		if l, _ := e.configMapLabels(ns, "settings"); l["tenant"] != "" {
			t.Errorf("the namespaced policy labelled %s/settings", ns)
		}
	}
}

// TestMutatingPolicyForbiddenWrite: a mutate-existing MutatingPolicy
// whose target writes RBAC forbids gets the Background condition False on
// the MutatingPolicy itself, naming the write; granted, the next trigger
// patches every target (Kyverno's add-privileged-existing-namespaces: no
// target spec, so the targets are matchConstraints' Namespaces) and the
// condition turns True.
func TestMutatingPolicyForbiddenWrite(t *testing.T) {
	e := startEnv(t)
	for _, ns := range []string{"mp-ns-a", "mp-ns-b"} {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"mpol-test": "true"}}})
	}
	cfg, extra := e.restrictedUser("mpol-restricted")
	e.startControllerAs(cfg, Options{MaxAttempts: 1})
	e.createCELPolicies("mpol-label-namespaces.yaml")

	condition := func() (*metav1.Condition, error) {
		var p policiesv1.MutatingPolicy
		if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "mpol-label-namespaces"}, &p); err != nil {
			return nil, err
		}
		// A policies.kyverno.io policy gets it as Kyverno's
		// RBACPermissionsGranted, in status.conditionStatus.
		cs := p.Status.ConditionStatus
		if c := meta.FindStatusCondition(cs.Conditions, policiesv1.ConditionRBACPermissionsGranted); c != nil {
			if c.Status == metav1.ConditionFalse && (cs.IsReady() || cs.Message == "") {
				return nil, fmt.Errorf("RBACPermissionsGranted False but conditionStatus ready %v, message %q", cs.IsReady(), cs.Message)
			}
			return c, nil
		}
		return nil, fmt.Errorf("no %s condition: %+v", policiesv1.ConditionRBACPermissionsGranted, cs.Conditions)
	}
	trigger := func() {
		t.Helper()
		var ns corev1.Namespace
		if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "mp-ns-a"}, &ns); err != nil {
			t.Fatal(err)
		}
		e.admit(kyvernov1.Update, &ns, &ns)
	}
	trigger()
	e.eventually("the Background condition names the forbidden update", func() error {
		c, err := condition()
		if err != nil {
			return err
		}
		want := "rule mpol-label-namespaces: may not update Namespace"
		if c.Status != metav1.ConditionFalse || c.Reason != ReasonForbidden || !strings.Contains(c.Message, want) {
			return fmt.Errorf("condition %s %s %q, want False %s containing %q", c.Status, c.Reason, c.Message, ReasonForbidden, want)
		}
		return nil
	})

	extra.Rules = append(extra.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"update"}})
	if err := e.cl.Update(e.ctx, extra); err != nil {
		t.Fatal(err)
	}
	trigger()
	for _, name := range []string{"mp-ns-a", "mp-ns-b"} {
		e.eventually("Namespace "+name+" labelled privileged", func() error {
			var ns corev1.Namespace
			if err := e.cl.Get(e.ctx, client.ObjectKey{Name: name}, &ns); err != nil {
				return err
			}
			if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
				return fmt.Errorf("labels %v", ns.Labels)
			}
			return nil
		})
	}
	e.eventually("the Background condition turns True", func() error {
		c, err := condition()
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionTrue || c.Reason != ReasonPermitted {
			return fmt.Errorf("condition %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
}
