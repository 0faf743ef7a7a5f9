package background

import (
	"fmt"
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// restrictedUser runs the controller with charter-background's own role
// (config/rbac/background/role.yaml) and read access to ResourceQuotas,
// and returns its configuration and the ClusterRole that grants the
// ResourceQuota rights, for the test to widen.
func (e *env) restrictedUser(name string) (*rest.Config, *rbacv1.ClusterRole) {
	e.t.Helper()
	data, err := os.ReadFile("../../config/rbac/background/role.yaml")
	if err != nil {
		e.t.Fatal(err)
	}
	var own rbacv1.ClusterRole
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var probe rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &probe); err != nil {
			e.t.Fatal(err)
		}
		if probe.Kind == "ClusterRole" {
			own = probe
		}
	}
	own.ObjectMeta = metav1.ObjectMeta{Name: name + "-own"}
	quotas := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-quotas"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"get", "list", "watch"}},
	}}
	for _, role := range []*rbacv1.ClusterRole{&own, quotas} {
		e.create(role)
		e.create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}}})
	}
	cfg := rest.CopyConfig(e.cp.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	return cfg, quotas
}

func (e *env) backgroundCondition(policy string) (*metav1.Condition, error) {
	var p kyvernov1.ClusterPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: policy}, &p); err != nil {
		return nil, err
	}
	c := meta.FindStatusCondition(p.Status.Conditions, ConditionBackground)
	if c == nil {
		return nil, fmt.Errorf("no %s condition: %+v", ConditionBackground, p.Status.Conditions)
	}
	return c, nil
}

// TestForbiddenWriteOnPolicyStatus: a generate rule whose write RBAC
// forbids turns the policy's Background condition False, naming the verb,
// group, kind and namespaces charter's controller lacks; once the
// permission is granted and the rule runs again, the condition turns True.
// The policy status controller's Ready condition is left alone.
func TestForbiddenWriteOnPolicyStatus(t *testing.T) {
	e := startEnv(t)
	for _, ns := range []string{"quota-a", "quota-b"} {
		e.namespace(ns)
	}
	cfg, quotas := e.restrictedUser("bg-restricted")
	e.startControllerAs(cfg, Options{})
	p := e.applyPolicy("quota.yaml", nil)
	p.Status.SetReady(true, p.Generation, kyvernov1.PolicyReasonSucceeded, "Ready")
	if err := e.cl.Status().Update(e.ctx, p); err != nil {
		t.Fatal(err)
	}

	e.eventually("the Background condition names the forbidden write", func() error {
		c, err := e.backgroundCondition("quota")
		if err != nil {
			return err
		}
		for _, want := range []string{"rule quota: may not create ResourceQuota (group core, resource resourcequotas) in namespaces quota-a, quota-b", AggregateLabel} {
			if c.Status != metav1.ConditionFalse || c.Reason != ReasonForbidden || !strings.Contains(c.Message, want) {
				return fmt.Errorf("condition %s %s %q, want False %s containing %q", c.Status, c.Reason, c.Message, ReasonForbidden, want)
			}
		}
		return nil
	})

	// The permission arrives; the next run of the rule (here: the policy
	// is edited) goes through and says so.
	quotas.Rules[0].Verbs = append(quotas.Rules[0].Verbs, "create", "update", "patch")
	if err := e.cl.Update(e.ctx, quotas); err != nil {
		t.Fatal(err)
	}
	e.applyPolicy("quota.yaml", func(p *kyvernov1.ClusterPolicy) {
		p.Spec.Rules[0].Generation.RawData.Raw = []byte(`{"spec":{"hard":{"pods":"20"}}}`)
	})
	e.eventually("the Background condition turns True", func() error {
		c, err := e.backgroundCondition("quota")
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionTrue || c.Reason != ReasonPermitted {
			return fmt.Errorf("condition %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	var cur kyvernov1.ClusterPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "quota"}, &cur); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(cur.Status.Conditions, kyvernov1.PolicyConditionReady) {
		t.Errorf("the Ready condition was lost: %+v", cur.Status.Conditions)
	}
}
