package background

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestGeneratingPolicyCloneSynchronized: a GeneratingPolicy with
// synchronize that clones an object it reads with resource.get (Kyverno's
// clone/sync tests) creates the copy in the trigger's namespace, and puts
// it back when it is deleted. charter failed the UpdateRequest instead
// ("write the apiVersion and kind of every generated object literally"):
// it knew only the kinds of map literals. The copy carries its source's
// uid (generate.kyverno.io/source-uid), follows the source's edits, and
// goes when the source is deleted, as Kyverno's
// clone/sync/sync-modify-source and sync-delete-source expect; charter
// left the copy of a deleted source in place (its runs failed reading
// the source).
func TestGeneratingPolicyCloneSynchronized(t *testing.T) {
	e := startEnv(t)
	source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpol-clone-source"}, StringData: map[string]string{"foo": "bar"}}
	e.create(source)
	t.Cleanup(func() {
		_ = e.cl.Delete(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpol-clone-source"}})
	})
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.createCELPolicies("gpol-clone-sync.yaml")

	trigger := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpol-clone-target", Labels: map[string]string{"clone": "yes", "bg-test": "true"}}}
	e.create(trigger)
	e.admit(kyvernov1.Create, trigger, nil)
	cloned := func() error {
		var s corev1.Secret
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "gpol-clone-target", Name: "gpol-clone-source"}, &s); err != nil {
			return err
		}
		if string(s.Data["foo"]) != "bar" {
			return fmt.Errorf("data %v", s.Data)
		}
		if s.Labels["generate.kyverno.io/policy-name"] != "gpol-clone-sync" {
			return fmt.Errorf("labels %v", s.Labels)
		}
		return nil
	}
	e.eventually("the Secret cloned into the new namespace", cloned)
	for _, ur := range e.updateRequests() {
		if ur.Spec.Policy == "gpol-clone-sync" && ur.Status.Message != "" {
			t.Errorf("UpdateRequest %s: %s %q", ur.Name, ur.Status.State, ur.Status.Message)
		}
	}
	if err := e.cl.Delete(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gpol-clone-target", Name: "gpol-clone-source"}}); err != nil {
		t.Fatal(err)
	}
	e.eventually("synchronize: the deleted copy is back", cloned)
	var copied corev1.Secret
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "gpol-clone-target", Name: "gpol-clone-source"}, &copied); err != nil {
		t.Fatal(err)
	}
	if got := copied.Labels["generate.kyverno.io/source-uid"]; got != string(source.UID) {
		t.Errorf("source-uid label %q, want the source's uid %q", got, source.UID)
	}

	source.StringData = map[string]string{"foo": "baz"}
	if err := e.cl.Update(e.ctx, source); err != nil {
		t.Fatal(err)
	}
	e.eventually("the copy follows the edited source", func() error {
		var s corev1.Secret
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "gpol-clone-target", Name: "gpol-clone-source"}, &s); err != nil {
			return err
		}
		if string(s.Data["foo"]) != "baz" {
			return fmt.Errorf("data %v", s.Data)
		}
		return nil
	})
	if err := e.cl.Delete(e.ctx, source); err != nil {
		t.Fatal(err)
	}
	e.eventually("the copy goes with its source", func() error {
		err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "gpol-clone-target", Name: "gpol-clone-source"}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("copy still there (%v)", err)
	})
}

// TestGeneratingPolicyCloneList: generator.Apply given the list
// resource.List returns clones every object listed into the trigger's
// namespace, as Kyverno's generating-policies/clone/nosync/generate-secrets
// expects. charter failed it: "generated object 0 has no apiVersion, kind
// or metadata.name" (the list itself).
func TestGeneratingPolicyCloneList(t *testing.T) {
	e := startEnv(t)
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpol-list-source"}})
	for _, name := range []string{"first", "second"} {
		e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gpol-list-source", Name: name}, StringData: map[string]string{"name": name}})
	}
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.createCELPolicies("gpol-clone-list.yaml")

	trigger := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpol-list-target", Labels: map[string]string{"clone-list": "yes", "bg-test": "true"}}}
	e.create(trigger)
	e.admit(kyvernov1.Create, trigger, nil)
	e.eventually("both Secrets cloned into the new namespace", func() error {
		for _, name := range []string{"first", "second"} {
			var s corev1.Secret
			if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "gpol-list-target", Name: name}, &s); err != nil {
				return err
			}
			if string(s.Data["name"]) != name {
				return fmt.Errorf("%s: data %v", name, s.Data)
			}
		}
		return nil
	})
}

// TestGeneratingPolicyNoSyncLeavesDeletedDownstream: without synchronize,
// a copy the user deletes stays deleted, as Kyverno's
// generating-policies/clone/nosync/nosync-delete-downstream expects;
// charter generated it again at once (the downstream watch queued the
// rule whatever its synchronize). A namespace created afterwards still
// gets its copies, which also shows the deletion was seen by then.
func TestGeneratingPolicyNoSyncLeavesDeletedDownstream(t *testing.T) {
	e := startEnv(t)
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpol-list-source"}})
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gpol-list-source", Name: "first"}, StringData: map[string]string{"name": "first"}})
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.createCELPolicies("gpol-clone-list.yaml")

	copied := func(ns string) func() error {
		return func() error {
			return e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "first"}, &corev1.Secret{})
		}
	}
	first := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpol-nosync-a", Labels: map[string]string{"clone-list": "yes", "bg-test": "true"}}}
	e.create(first)
	e.admit(kyvernov1.Create, first, nil)
	e.eventually("the Secret cloned into the first namespace", copied("gpol-nosync-a"))
	if err := e.cl.Delete(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gpol-nosync-a", Name: "first"}}); err != nil {
		t.Fatal(err)
	}

	second := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpol-nosync-b", Labels: map[string]string{"clone-list": "yes", "bg-test": "true"}}}
	e.create(second)
	e.admit(kyvernov1.Create, second, nil)
	e.eventually("the Secret cloned into the second namespace", copied("gpol-nosync-b"))
	if err := copied("gpol-nosync-a")(); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted copy: %v, want it to stay deleted (no synchronize)", err)
	}
}
