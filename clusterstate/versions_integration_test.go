package clusterstate

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

// TestOlderVersionsAreInstalled: policies applied in another served
// version (policies.kyverno.io/v1alpha1, kyverno.io/v2beta1) are seen by
// the policy cache, which watches the hub versions, as installed policies
// of their hub kinds.
func TestOlderVersionsAreInstalled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := controlplanetest.Start(ctx, t)
	mgr := newManager(t, cp, ctrl.Options{})
	state, err := New(mgr, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	for _, c := range []struct {
		doc, version, resource string
	}{
		{denyPodsVPol, "policies.kyverno.io/v1alpha1", "validatingpolicies"},
		{denyPods, "kyverno.io/v2beta1", "clusterpolicies"},
	} {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(c.doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		obj.SetAPIVersion(c.version)
		gv, _ := schema.ParseGroupVersion(c.version)
		if _, err := dyn.Resource(gv.WithResource(c.resource)).Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", c.version, obj.GetKind(), err)
		}
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	if !state.Policies.WaitForSync(ctx) {
		t.Fatal("the policy cache did not sync")
	}
	var got []string
	for _, p := range state.Policies.Installed().Policies {
		got = append(got, p.GetKind()+"/"+p.GetName())
	}
	for _, want := range []string{"ValidatingPolicy/deny-pods-cel", "ClusterPolicy/deny-pods"} {
		if !slices.Contains(got, want) {
			t.Errorf("installed policies %v, want %s among them", got, want)
		}
	}
}
