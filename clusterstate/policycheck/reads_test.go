package policycheck

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestReadWarningsAskWhatRulesMatch: as Kyverno, a validate rule warns of
// the first kind the reports controller may not read, a mutate rule of
// each, autogen's rules for Pod controllers are asked about too, a rule
// naming a wildcard kind is not asked about, nor a generate rule; the
// same warning is given once.
func TestReadWarningsAskWhatRulesMatch(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "Pod", Namespaced: true},
			{Name: "secrets", Kind: "Secret", Namespaced: true},
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
			{Name: "namespaces", Kind: "Namespace"},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Namespaced: true},
		}},
	}}}
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(`
metadata: {name: reads}
spec:
  rules:
  - name: pods
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {failureAction: Audit, pattern: {metadata: {labels: {team: "?*"}}}}
  - name: first-only
    match: {any: [{resources: {kinds: [Secret, ConfigMap]}}]}
    validate: {failureAction: Audit, pattern: {metadata: {labels: {team: "?*"}}}}
  - name: each
    match: {any: [{resources: {kinds: [Secret, ConfigMap]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {team: a}}}}
  - name: wildcard
    match: {any: [{resources: {kinds: [Namespace, "*Map"]}}]}
    validate: {failureAction: Audit, pattern: {metadata: {labels: {team: "?*"}}}}
  - name: generate
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate: {apiVersion: v1, kind: ConfigMap, name: x, namespace: "{{request.object.metadata.name}}", data: {}}
`), &p); err != nil {
		t.Fatal(err)
	}
	// Only a policy whose rules all match Pods gets autogen's rules.
	var pods kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(`
metadata: {name: pods}
spec:
  rules:
  - name: pods
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {failureAction: Audit, pattern: {metadata: {labels: {team: "?*"}}}}
`), &pods); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		policy *kyvernov1.ClusterPolicy
		want   []string
	}{
		{&p, []string{
			"reports requires permissions get,list,watch for resource v1/Pod",
			"reports requires permissions get,list,watch for resource v1/Secret",
			"reports requires permissions get,list,watch for resource v1/ConfigMap",
		}},
		{&pods, []string{
			"reports requires permissions get,list,watch for resource v1/Pod",
			"reports requires permissions get,list,watch for resource apps/v1/Deployment",
		}},
	} {
		access := &allowVerbs{}
		got, err := ReadWarnings(c.policy, NewDiscoveryCluster(disco), &Writer{User: "reports", Access: access})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: warnings:\n%q\nwant:\n%q", c.policy.Name, got, c.want)
		}
		if slices.ContainsFunc(access.asked, func(a string) bool { return strings.Contains(a, "namespaces") }) {
			t.Errorf("%s: asked %q; the wildcard and generate rules' Namespace is not asked about", c.policy.Name, access.asked)
		}
	}
}
