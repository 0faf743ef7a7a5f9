package cleanup

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/loaders"
)

// TestDeletingPolicyLibraries: a DeletingPolicy's conditions may call the
// resource library (Kyverno's deleting-policies/cel-lib/resource-lib: the
// value of a ConfigMap decides) and the http library (cel-lib/http-lib:
// what a service answers decides), on a real API server. The cleanup
// controller had no resource loader, so every run of such a policy failed
// ("no resource loader") and deleted nothing.
func TestDeletingPolicyLibraries(t *testing.T) {
	e := startEnv(t)
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"metadata": {"labels": {"app": "test"}}}`)
	}))
	t.Cleanup(service.Close)
	u, err := url.Parse(service.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The service is on loopback, which the egress guard lets through
	// only when told (serve --egress-allow).
	e.startController(clusterstate.WithHTTPLimits(loaders.HTTPLimits{AllowedAddresses: []string{u.Host}}))

	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "clusterregistries"}, Data: map[string]string{"registries": "enabled"}})
	for _, cm := range []*corev1.ConfigMap{
		configMap("team-a", "by-resource", map[string]string{"lib": "resource"}),
		configMap("team-a", "by-http", map[string]string{"lib": "http"}),
		configMap("team-b", "kept-resource", map[string]string{"lib": "resource-off"}),
	} {
		e.create(cm)
	}
	e.create(decodePolicy(t, &policiesv1.DeletingPolicy{}, `
metadata: {name: resource-lib}
spec:
  schedule: "*/2 * * * * *"
  matchConstraints:
    objectSelector: {matchLabels: {lib: resource}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [configmaps]}
  conditions:
  - name: check-cm-value
    expression: 'resource.get("v1", "configmaps", "team-a", "clusterregistries").data["registries"] == "enabled"'
`))
	e.create(decodePolicy(t, &policiesv1.DeletingPolicy{}, `
metadata: {name: resource-lib-off}
spec:
  schedule: "*/2 * * * * *"
  matchConstraints:
    objectSelector: {matchLabels: {lib: resource-off}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [configmaps]}
  conditions:
  - name: check-cm-value
    expression: 'resource.get("v1", "configmaps", "team-a", "clusterregistries").data["registries"] == "disabled"'
`))
	e.create(decodePolicy(t, &policiesv1.DeletingPolicy{}, `
metadata: {name: http-lib}
spec:
  schedule: "*/2 * * * * *"
  matchConstraints:
    objectSelector: {matchLabels: {lib: http}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [configmaps]}
  conditions:
  - name: http-200-check
    expression: 'http.get("`+service.URL+`").metadata.labels.app == "test"'
`))
	e.eventually("the ConfigMaps the libraries select deleted", 30*time.Second, func() error {
		for _, name := range []string{"by-resource", "by-http"} {
			if err := e.gone("team-a", name)(); err != nil {
				return err
			}
		}
		return nil
	})
	if !e.exists("team-b", "kept-resource") {
		t.Error("team-b/kept-resource deleted though its condition is false")
	}
}
