package background

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestMutateExistingOnDelete: the deletion of a trigger runs a
// mutate-existing rule whose match asks for DELETE, with
// request.operation DELETE and the deleted object as request.object, as
// in Kyverno's basic-delete (background-cleanup.md §4.1): the Secret is
// labelled with the deleted ConfigMap's name. The background run used to
// evaluate the rule as a CREATE, which a DELETE-only rule does not match,
// so the UpdateRequest completed having done nothing.
func TestMutateExistingOnDelete(t *testing.T) {
	e := startEnv(t)
	e.namespace("staging-2")
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "staging-2", Name: "test-secret-2"}, StringData: map[string]string{"a": "b"}})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "staging-2", Name: "dictionary-2"}, Data: map[string]string{"a": "b"}}
	e.create(cm)
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.applyPolicy("delete-trigger.yaml", nil)

	if err := e.cl.Delete(e.ctx, cm); err != nil {
		t.Fatal(err)
	}
	e.admit(kyvernov1.Delete, nil, cm)
	e.eventually("Secret test-secret-2 labelled foo=dictionary-2", func() error {
		var s corev1.Secret
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "staging-2", Name: "test-secret-2"}, &s); err != nil {
			return err
		}
		if s.Labels["foo"] != "dictionary-2" {
			return fmt.Errorf("labels %v", s.Labels)
		}
		return nil
	})
	e.updateRequestsDone("mutate-on-delete")
}

// TestMutatingPolicyOnDelete is Kyverno's auto-bind-sa-remove: a
// mutate-existing MutatingPolicy triggered by the deletion of a
// ServiceAccount reads it as request.oldObject (in matchConditions and
// variables; charter refused such a policy as not compiling) while
// `object` is each ClusterRoleBinding, and removes the ServiceAccount from
// the bindings' subjects by index. A ServiceAccount without the
// annotation is left in its binding.
func TestMutatingPolicyOnDelete(t *testing.T) {
	e := startEnv(t)
	e.namespace("auto-bind")
	sa := func(name string, annotated bool) *corev1.ServiceAccount {
		s := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "auto-bind", Name: name}}
		if annotated {
			s.Annotations = map[string]string{"rbac.example.com/auto-bind": "true"}
		}
		return s
	}
	subject := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "ServiceAccount", Name: name, Namespace: "auto-bind"}
	}
	binding := func(name string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
			Subjects: subjects}
	}
	e.create(binding("auto-bind-remove", subject("keep-before"), subject("annotated"), subject("keep-after")))
	e.create(binding("auto-bind-other", subject("plain")))
	t.Cleanup(func() {
		for _, name := range []string{"auto-bind-remove", "auto-bind-other"} {
			_ = e.cl.Delete(e.ctx, binding(name))
		}
	})
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.createCELPolicies("mpol-delete-trigger.yaml")

	subjects := func(name string) ([]string, error) {
		var b rbacv1.ClusterRoleBinding
		if err := e.cl.Get(e.ctx, client.ObjectKey{Name: name}, &b); err != nil {
			return nil, err
		}
		var out []string
		for _, s := range b.Subjects {
			out = append(out, s.Name)
		}
		return out, nil
	}
	annotated, plain := sa("annotated", true), sa("plain", false)
	for _, s := range []*corev1.ServiceAccount{annotated, plain} {
		e.create(s)
		if err := e.cl.Delete(e.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	e.admit(kyvernov1.Delete, nil, annotated)
	e.eventually("the annotated ServiceAccount removed from its binding", func() error {
		got, err := subjects("auto-bind-remove")
		if err != nil {
			return err
		}
		if fmt.Sprint(got) != "[keep-before keep-after]" {
			return fmt.Errorf("subjects %v, want [keep-before keep-after]", got)
		}
		return nil
	})
	e.updateRequestsDone("auto-bind-sa-remove")
	// The ServiceAccount without the annotation triggers nothing: its
	// matchCondition does not hold, so admission makes no UpdateRequest.
	if urs := e.build(kyvernov1.Delete, nil, plain); len(urs) != 0 {
		t.Errorf("the deletion of an unannotated ServiceAccount made %d UpdateRequests", len(urs))
	}
	if got, err := subjects("auto-bind-other"); err != nil || fmt.Sprint(got) != "[plain]" {
		t.Errorf("binding auto-bind-other has subjects %v (%v), want [plain]", got, err)
	}
}

// updateRequestsDone waits until every UpdateRequest of the policy has
// completed and been deleted.
func (e *env) updateRequestsDone(policy string) {
	e.t.Helper()
	e.eventually("the UpdateRequests of "+policy+" completed and deleted", func() error {
		for _, ur := range e.updateRequests() {
			if ur.Spec.Policy == policy {
				return fmt.Errorf("UpdateRequest %s %s %q", ur.Name, ur.Status.State, ur.Status.Message)
			}
		}
		return nil
	})
}
