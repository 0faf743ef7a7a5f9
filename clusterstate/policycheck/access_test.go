package policycheck

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// denyAll refuses everything and keeps what it was asked.
type denyAll struct {
	asked []authorizationv1.ResourceAttributes
}

func (d *denyAll) Allowed(_ context.Context, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	d.asked = append(d.asked, attrs)
	return false, "", nil
}

// TestWriteFaultsAskWhatTheRuleWrites: each generate rule, cloneList kind
// and mutate-existing target is asked about as Kyverno asks (its verbs,
// its resource, its namespace; a namespace with variables as every
// namespace), and refused at its field; a kind with variables and a kind
// the cluster does not serve are not asked.
func TestWriteFaultsAskWhatTheRuleWrites(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
			{Name: "secrets", Kind: "Secret", Namespaced: true},
		}},
		{GroupVersion: "networking.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "networkpolicies", Kind: "NetworkPolicy", Namespaced: true},
		}},
	}}}
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(`
metadata: {name: writes}
spec:
  rules:
  - name: netpol
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: deny
      namespace: "{{request.object.metadata.name}}"
      data: {spec: {}}
  - name: clones
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      synchronize: true
      namespace: team
      cloneList: {namespace: base, kinds: [v1/Secret, v1/Widget]}
  - name: variable-kind
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate: {apiVersion: v1, kind: "{{request.object.kind}}", name: x, namespace: team, data: {}}
  - name: targets
    match: {any: [{resources: {kinds: [Secret]}}]}
    mutate:
      targets: [{apiVersion: v1, kind: ConfigMap, namespace: team, name: settings}]
      patchStrategicMerge: {metadata: {labels: {a: b}}}
`), &p); err != nil {
		t.Fatal(err)
	}
	access := &denyAll{}
	faults, err := WriteFaults(&p, NewDiscoveryCluster(disco), &Writer{User: "bg", Access: access})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"spec.rules[0].generate":                    "bg requires permissions get,create for resource networking.k8s.io/v1/NetworkPolicy",
		"spec.rules[1].generate.cloneList.kinds[0]": "bg requires permissions get,create,update,delete for resource v1/Secret in namespace team",
		"spec.rules[3].mutate.targets[0]":           "auth check fails, additional privileges are required for the service account 'bg': bg requires permissions get,update for resource v1/ConfigMap in namespace team",
	}
	if len(faults) != len(want) {
		t.Fatalf("faults %v, want %v", faults, want)
	}
	for _, f := range faults {
		if want[f.Field] != f.Fault {
			t.Errorf("%s: %q, want %q", f.Field, f.Fault, want[f.Field])
		}
	}
	var asked []string
	for _, a := range access.asked {
		asked = append(asked, a.Verb+" "+a.Group+"/"+a.Resource+" ns="+a.Namespace+" name="+a.Name)
	}
	if got, exp := strings.Join(asked, "\n"), strings.Join([]string{
		"get networking.k8s.io/networkpolicies ns= name=deny", "create networking.k8s.io/networkpolicies ns= name=deny",
		"get /secrets ns=team name=", "create /secrets ns=team name=", "update /secrets ns=team name=", "delete /secrets ns=team name=",
		"get /configmaps ns=team name=settings", "update /configmaps ns=team name=settings",
	}, "\n"); got != exp {
		t.Errorf("asked:\n%s\nwant:\n%s", got, exp)
	}
}

// allowVerbs allows the verbs it holds and keeps what it was asked.
type allowVerbs struct {
	verbs []string
	asked []string
}

func (a *allowVerbs) Allowed(_ context.Context, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	a.asked = append(a.asked, attrs.Verb+" "+attrs.Resource+" ns="+attrs.Namespace+" name="+attrs.Name)
	return slices.Contains(a.verbs, attrs.Verb), "", nil
}

// TestDeleteFaultsAskWhatThePolicyDeletes: each kind of a
// ClusterCleanupPolicy's match is asked about as Kyverno asks (delete,
// then list, per name), and refused at its field with the first verb
// denied; a kind with variables and one the cluster does not serve are
// not asked.
func TestDeleteFaultsAskWhatThePolicyDeletes(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "Pod", Namespaced: true},
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
		}},
	}}}
	var p kyvernov2.ClusterCleanupPolicy
	if err := yaml.UnmarshalStrict([]byte(`
metadata: {name: stale}
spec:
  schedule: "0 * * * *"
  match:
    any:
    - resources: {kinds: [Pod, "{{request.object.kind}}", Widget], names: [a, b]}
    all:
    - resources: {kinds: [ConfigMap]}
`), &p); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		allowed []string
		want    map[string]string
		asked   []string
	}{
		{nil, map[string]string{
			"spec.match.any[0].resources.kinds[0]": "cleanup controller has no permission to delete kind Pod",
			"spec.match.all[0].resources.kinds[0]": "cleanup controller has no permission to delete kind ConfigMap",
		}, []string{"delete pods ns= name=a", "delete configmaps ns= name="}},
		{[]string{"delete"}, map[string]string{
			"spec.match.any[0].resources.kinds[0]": "cleanup controller has no permission to list kind Pod",
			"spec.match.all[0].resources.kinds[0]": "cleanup controller has no permission to list kind ConfigMap",
		}, []string{"delete pods ns= name=a", "list pods ns= name=a", "delete configmaps ns= name=", "list configmaps ns= name="}},
		{[]string{"delete", "list"}, map[string]string{}, []string{
			"delete pods ns= name=a", "list pods ns= name=a", "delete pods ns= name=b", "list pods ns= name=b",
			"delete configmaps ns= name=", "list configmaps ns= name="}},
	} {
		access := &allowVerbs{verbs: c.allowed}
		faults, err := DeleteFaults(&p, NewDiscoveryCluster(disco), &Writer{User: "cleanup", Access: access})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, f := range faults {
			got[f.Field] = f.Fault
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("allowed %v: faults %v, want %v", c.allowed, got, c.want)
		}
		if !slices.Equal(access.asked, c.asked) {
			t.Errorf("allowed %v: asked %q, want %q", c.allowed, access.asked, c.asked)
		}
	}
}
