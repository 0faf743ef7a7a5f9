package background

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/impersonate/impersonatetest"
)

// grantPolicyServiceAccount creates the ServiceAccount namespaced policies
// of ns act as, with a namespace owner's rights (impersonatetest.Grant).
func (e *env) grantPolicyServiceAccount(ns string) {
	e.t.Helper()
	if err := impersonatetest.Grant(e.ctx, e.cl, ns); err != nil {
		e.t.Fatal(err)
	}
}

// namespacedBackgroundCondition is backgroundCondition for a Policy.
func (e *env) namespacedBackgroundCondition(ns, policy string) (*metav1.Condition, error) {
	var p kyvernov1.Policy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: policy}, &p); err != nil {
		return nil, err
	}
	c := meta.FindStatusCondition(p.Status.Conditions, ConditionBackground)
	if c == nil {
		return nil, fmt.Errorf("no %s condition: %+v", ConditionBackground, p.Status.Conditions)
	}
	return c, nil
}

// TestNamespacedPolicyWritesAsItsServiceAccount: a Policy's generate and
// mutate-existing writes are made as the ServiceAccount charter-policy of
// its namespace, though the controller itself runs as the cluster's admin
// here. In tenant, whose ServiceAccount holds a namespace owner's rights
// (ResourceQuotas read only), the Policy's ConfigMap is generated, but the Role granting ResourceQuota writes is
// refused by RBAC's escalation check and the platform's ResourceQuota is
// not raised; the Policy's Background condition names the ServiceAccount
// and each refused verb. In no-sa, without that ServiceAccount, nothing
// is written and the condition says it does not exist. With charter's
// identity (before impersonation) all of it was written.
func TestNamespacedPolicyWritesAsItsServiceAccount(t *testing.T) {
	e := startEnv(t)
	for _, ns := range []string{"tenant", "no-sa"} {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		e.create(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}})
		e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "seed"}})
	}
	e.grantPolicyServiceAccount("tenant")
	e.startController(Options{MaxAttempts: 2})
	data, err := os.ReadFile(filepath.Join("testdata", "tenant-escalate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"tenant", "no-sa"} {
		var p kyvernov1.Policy
		if err := yaml.UnmarshalStrict(data, &p); err != nil {
			t.Fatal(err)
		}
		p.Namespace = ns
		e.create(&p)
	}

	e.eventually("tenant's ConfigMap generated as tenant/charter-policy", func() error {
		return e.cl.Get(e.ctx, client.ObjectKey{Namespace: "tenant", Name: "allowed"}, &corev1.ConfigMap{})
	})
	condition := func(ns string, want ...string) func() error {
		return func() error {
			c, err := e.namespacedBackgroundCondition(ns, "escalate")
			if err != nil {
				return err
			}
			if c.Status != metav1.ConditionFalse || c.Reason != ReasonForbidden {
				return fmt.Errorf("condition %s %s %q", c.Status, c.Reason, c.Message)
			}
			for _, w := range want {
				if !strings.Contains(c.Message, w) {
					return fmt.Errorf("condition message %q lacks %q", c.Message, w)
				}
			}
			return nil
		}
	}
	e.eventually("tenant's Background condition names the ServiceAccount and the refused writes", condition("tenant",
		"rule grant-quota-admin: ServiceAccount tenant/charter-policy", "create Role (group rbac.authorization.k8s.io, resource roles) in namespace tenant",
		"rule raise-quota: ServiceAccount tenant/charter-policy", "update ResourceQuota (group core, resource resourcequotas) in namespace tenant"))
	e.eventually("no-sa's Background condition says its ServiceAccount does not exist", condition("no-sa",
		"ServiceAccount no-sa/charter-policy", "does not exist", "create it and bind it a Role in namespace no-sa"))

	for _, ns := range []string{"tenant", "no-sa"} {
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "quota-admin"}, &rbacv1.Role{}); !apierrors.IsNotFound(err) {
			t.Errorf("Role %s/quota-admin: %v, want not found", ns, err)
		}
		var q corev1.ResourceQuota
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "platform"}, &q); err != nil {
			t.Fatal(err)
		}
		if pods := q.Spec.Hard[corev1.ResourcePods]; pods.String() != "10" {
			t.Errorf("ResourceQuota %s/platform raised to %s pods", ns, pods.String())
		}
	}
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "no-sa", Name: "allowed"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap no-sa/allowed: %v, want not found (no ServiceAccount to write as)", err)
	}
}
