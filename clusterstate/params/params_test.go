package params

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
)

var configMaps = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// newInformers returns a running set over a fake API server holding one
// ConfigMap, and the server's client; allowed answers its access reviews.
func newInformers(t *testing.T, allowed bool) (*Informers, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "limits", "namespace": "shop"}, "data": map[string]any{"max": "1"}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{{Version: "v1", Resource: "configmaps"}: "ConfigMapList"}, cm)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(configMaps, meta.RESTScopeNamespace)
	kube := kubefake.NewClientset()
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		review.Status.Allowed = allowed
		return true, review, nil
	})
	s := New(dyn, mapper, kube.AuthorizationV1().SelfSubjectAccessReviews(), logr.Discard())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, dyn
}

func policy() kyvernov1.PolicyInterface {
	return &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{{
		Name: "r", Validation: &kyvernov1.Validation{CEL: &kyvernov1.CEL{ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}}},
	}}}}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: timed out", what)
}

// TestInformersFollowPolicies: an informer runs while a policy names its
// kind and serves the objects asked for; it stops when none does.
func TestInformersFollowPolicies(t *testing.T) {
	s, _ := newInformers(t, true)
	p := policy()
	if _, decided := s.Fault(p); decided {
		t.Fatal("decided before the kind was looked at")
	}
	s.Watch(KindsOf([]kyvernov1.PolicyInterface{p}))
	waitFor(t, "kind looked at", func() bool { _, d := s.Fault(p); return d })
	if msg, _ := s.Fault(p); msg != "" {
		t.Fatalf("fault %q, want none", msg)
	}
	for _, tc := range []struct {
		q    loader.ObjectQuery
		want int
	}{
		{loader.ObjectQuery{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "limits"}, 1},
		{loader.ObjectQuery{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop"}, 1},
		{loader.ObjectQuery{APIVersion: "v1", Kind: "ConfigMap", Namespace: "other"}, 0},
		{loader.ObjectQuery{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "nope"}, 0},
		{loader.ObjectQuery{APIVersion: "v1", Kind: "ConfigMap"}, 1},
	} {
		got, err := s.Objects(t.Context(), tc.q)
		if err != nil || len(got) != tc.want {
			t.Errorf("%+v: %d objects, %v; want %d", tc.q, len(got), err, tc.want)
		}
	}
	s.Watch(KindsOf(nil))
	waitFor(t, "informer stopped", func() bool { _, d := s.Fault(p); return !d })
	if _, err := s.Objects(t.Context(), loader.ObjectQuery{APIVersion: "v1", Kind: "ConfigMap"}); err == nil || !strings.Contains(err.Error(), "not watched") {
		t.Errorf("after the last policy went: %v, want not watched", err)
	}
}

// TestInformersForbidden: a kind charter may not list gets no informer;
// the fault names the verb, group and resource, and reads fail.
func TestInformersForbidden(t *testing.T) {
	s, _ := newInformers(t, false)
	p := policy()
	s.Watch(KindsOf([]kyvernov1.PolicyInterface{p}))
	waitFor(t, "kind looked at", func() bool { _, d := s.Fault(p); return d })
	msg, _ := s.Fault(p)
	if !strings.HasPrefix(msg, `forbidden: charter may not list configmaps of API group "" (core)`) {
		t.Errorf("fault %q", msg)
	}
	if _, err := s.Objects(t.Context(), loader.ObjectQuery{APIVersion: "v1", Kind: "ConfigMap"}); err == nil || err.Error() != msg {
		t.Errorf("read: %v, want %q", err, msg)
	}
}

// TestParamChanges: a param object created, updated or deleted after the
// informer's first list is told to OnParamChange, once the informer serves
// it, with the object; the first list is no change.
func TestParamChanges(t *testing.T) {
	s, dyn := newInformers(t, true)
	changes := make(chan string, 10)
	s.OnParamChange(func(gvk schema.GroupVersionKind, obj metav1.Object) {
		// What a subscriber reads now holds the change.
		got, _ := s.Objects(t.Context(), loader.ObjectQuery{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "limits"})
		if len(got) == 1 && got[0]["data"].(map[string]any)["max"] == "1" {
			t.Errorf("a change told before the informer held it")
		}
		name := "<nil>"
		if obj != nil {
			name = obj.GetNamespace() + "/" + obj.GetName()
		}
		changes <- gvk.String() + " " + name
	})
	p := policy()
	s.Watch(KindsOf([]kyvernov1.PolicyInterface{p}))
	waitFor(t, "kind looked at", func() bool { _, d := s.Fault(p); return d })
	waitFor(t, "informer synced", func() bool {
		got, err := s.Objects(t.Context(), loader.ObjectQuery{APIVersion: "v1", Kind: "ConfigMap"})
		return err == nil && len(got) == 1
	})
	if n := len(changes); n != 0 {
		t.Errorf("%d changes told for the first list, want none", n)
	}
	cms := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("shop")
	cm, err := cms.Get(t.Context(), "limits", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Object["data"] = map[string]any{"max": "2"}
	cm.SetResourceVersion("2")
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(t.Context(), "limits", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case got := <-changes:
			if want := configMaps.String() + " shop/limits"; got != want {
				t.Errorf("change %d: %q, want %q", i, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d changes told, want 2", i)
		}
	}
	if n := len(changes); n != 0 {
		t.Errorf("%d changes told beyond the update and the delete", n)
	}
}

// TestReads: a param object may be read by a policy when a rule's
// paramKind is its kind and the rule's paramRef may select it (name,
// namespace, selector); a namespaced Policy reads its own namespace only.
func TestReads(t *testing.T) {
	withRef := func(ns string, ref *admissionregistrationv1.ParamRef) kyvernov1.PolicyInterface {
		rule := kyvernov1.Rule{Name: "r", Validation: &kyvernov1.Validation{CEL: &kyvernov1.CEL{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}, ParamRef: ref}}}
		if ns != "" {
			return &kyvernov1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{rule}}}
		}
		return &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{rule}}}
	}
	cm := func(ns, name string, lbls map[string]string) metav1.Object {
		return &metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}
	}
	byName := &admissionregistrationv1.ParamRef{Name: "limits"}
	bySelector := &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"params": "yes"}}}
	for _, tc := range []struct {
		name string
		p    kyvernov1.PolicyInterface
		gvk  schema.GroupVersionKind
		obj  metav1.Object
		want bool
	}{
		{"by name, in any namespace", withRef("", byName), configMaps, cm("shop", "limits", nil), true},
		{"another name", withRef("", byName), configMaps, cm("shop", "other", nil), false},
		{"by name in a namespace", withRef("", &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "platform"}), configMaps, cm("shop", "limits", nil), false},
		{"by selector", withRef("", bySelector), configMaps, cm("shop", "any", map[string]string{"params": "yes"}), true},
		{"not selected", withRef("", bySelector), configMaps, cm("shop", "any", nil), false},
		{"a namespaced Policy, its namespace", withRef("shop", byName), configMaps, cm("shop", "limits", nil), true},
		{"a namespaced Policy, another namespace", withRef("shop", byName), configMaps, cm("web", "limits", nil), false},
		{"another kind", withRef("", byName), schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, cm("shop", "limits", nil), false},
		{"no paramRef", withRef("", nil), configMaps, cm("shop", "other", nil), true},
		{"object unknown", withRef("", byName), configMaps, nil, true},
	} {
		if got := Reads(tc.p, tc.gvk, tc.obj); got != tc.want {
			t.Errorf("%s: Reads %v, want %v", tc.name, got, tc.want)
		}
	}
}
