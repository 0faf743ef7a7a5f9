package policycheck

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestSyncReadFaultsAskWhatSynchronizedRulesWrite: only a synchronized
// generate rule is asked about, list then get as Kyverno asks its
// admission controller, for its kind, each foreach entry's and each
// cloneList kind, in their namespace; each is refused at its field; a
// rule without synchronize is not asked. A namespaced Policy is asked
// too, named by its namespace.
func TestSyncReadFaultsAskWhatSynchronizedRulesWrite(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
			{Name: "secrets", Kind: "Secret", Namespaced: true},
		}},
	}}}
	var p kyvernov1.Policy
	if err := yaml.UnmarshalStrict([]byte(`
metadata: {name: reads, namespace: team}
spec:
  rules:
  - name: once
    match: {any: [{resources: {kinds: [Pod]}}]}
    generate: {apiVersion: v1, kind: Secret, name: x, namespace: team, data: {}}
  - name: synced
    match: {any: [{resources: {kinds: [Pod]}}]}
    generate: {synchronize: true, apiVersion: v1, kind: ConfigMap, name: x, namespace: team, data: {}}
  - name: clones
    match: {any: [{resources: {kinds: [Pod]}}]}
    generate:
      synchronize: true
      namespace: team
      cloneList: {namespace: team, kinds: [v1/Secret]}
  - name: each
    match: {any: [{resources: {kinds: [Pod]}}]}
    generate:
      synchronize: true
      foreach:
      - list: request.object.spec.containers
        apiVersion: v1
        kind: Secret
        name: "{{element.name}}"
        namespace: team
        data: {}
`), &p); err != nil {
		t.Fatal(err)
	}
	access := &allowVerbs{verbs: []string{"list"}}
	faults, err := SyncReadFaults(&p, NewDiscoveryCluster(disco), &Writer{User: "adm", Access: access})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range faults {
		got = append(got, f.Error())
	}
	want := []string{
		`Policy "team/reads": spec.rules[1].generate: adm requires permissions get for resource v1/ConfigMap in namespace team`,
		`Policy "team/reads": spec.rules[2].generate.cloneList.kinds[0]: adm requires permissions get for resource v1/Secret in namespace team`,
		`Policy "team/reads": spec.rules[3].generate.foreach[0]: adm requires permissions get for resource v1/Secret in namespace team`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("faults:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantAsked := []string{
		"list configmaps ns=team name=x", "get configmaps ns=team name=x",
		"list secrets ns=team name=", "get secrets ns=team name=",
		"list secrets ns=team name=", "get secrets ns=team name=",
	}
	if strings.Join(access.asked, "\n") != strings.Join(wantAsked, "\n") {
		t.Errorf("asked:\n%s\nwant:\n%s", strings.Join(access.asked, "\n"), strings.Join(wantAsked, "\n"))
	}
}
