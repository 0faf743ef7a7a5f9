package background

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
)

// TestGeneratingPolicySubresourceTrigger: a GeneratingPolicy triggered by a
// subresource request (a Pod's eviction: an Eviction object on
// pods/eviction) generates from the request's object, as Kyverno's
// generate-on-eviction-subresource-trigger expects. charter read the
// trigger back from the API server first, which an Eviction cannot be:
// the UpdateRequest failed until it gave up.
func TestGeneratingPolicySubresourceTrigger(t *testing.T) {
	e := startEnv(t)
	e.namespace("evict")
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.createCELPolicies("gpol-eviction.yaml")
	eviction := map[string]any{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": map[string]any{"name": "web", "namespace": "evict"}}
	urs := e.buildRequest(&engine.Request{Operation: kyvernov1.Create, Object: eviction,
		Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "eviction"})
	if len(urs) != 1 {
		t.Fatalf("%d UpdateRequests for the eviction, want 1", len(urs))
	}
	e.createUpdateRequests(urs)
	e.eventually("the ConfigMap generated for the eviction", func() error {
		return e.cl.Get(e.ctx, client.ObjectKey{Namespace: "evict", Name: "evicted-web"}, &corev1.ConfigMap{})
	})
}
