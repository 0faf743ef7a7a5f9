package policycheck

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/internal/corpus"
)

// TestKindFaultsAsTheCorpusReadsThem: a policy naming a kind discovery
// does not list is refused at that kind's field, once per kind, and the
// drop-in tests (corpus.OnlyKindsNotServed) read the refusal as Kyverno's
// check of served kinds; a served kind, a subresource discovery lists and
// "*" pass.
func TestKindFaultsAsTheCorpusReadsThem(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Namespaced: true},
			{Name: "deployments/scale", Kind: "Scale", Namespaced: true},
		}},
	}}}
	p := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "vpa"}}
	p.Spec.Rules = []kyvernov1.Rule{{Name: "r", MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{
		{ResourceDescription: kyvernov1.ResourceDescription{Kinds: []string{"Deployment", "apps/v1/Deployment/scale", "VerticalPodAutoscaler", "*"}}},
	}}}}
	faults, err := KindFaults(p, NewDiscoveryCluster(disco))
	if err != nil {
		t.Fatal(err)
	}
	if len(faults) != 1 || faults[0].Field != "spec.rules[0].match.any[0].resources.kinds[2]" {
		t.Fatalf("faults %v, want one at spec.rules[0].match.any[0].resources.kinds[2]", faults)
	}
	if refusal := `admission webhook "validate-policy.charter.svc" denied the request: ` + faults.Error(); !corpus.OnlyKindsNotServed(refusal) {
		t.Errorf("corpus.OnlyKindsNotServed(%q) = false", refusal)
	}
}

// TestClusterWideKindsInNamespacedPolicy: a namespaced Policy naming a
// cluster-scoped kind as Kyverno looks it up ("Namespace",
// "v1/Namespace") is refused at the kind's field in Kyverno's words; a
// selector with a wildcard or a subresource, which Kyverno does not find
// among the cluster-scoped kinds, and a namespaced kind pass; a
// ClusterPolicy may name any of them.
func TestClusterWideKindsInNamespacedPolicy(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "Pod", Namespaced: true},
			{Name: "namespaces", Kind: "Namespace"},
			{Name: "namespaces/status", Kind: "Namespace"},
		}},
	}}}
	kinds := []string{"Pod", "Namespace", "v1/Namespace", "*/Namespace", "Namespace/status", "Name*"}
	spec := kyvernov1.Spec{Rules: []kyvernov1.Rule{{Name: "r",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{
			{ResourceDescription: kyvernov1.ResourceDescription{Kinds: kinds}}}},
		ExcludeResources: &kyvernov1.MatchResources{ResourceDescription: kyvernov1.ResourceDescription{Kinds: []string{"Namespace"}}},
	}}}
	cluster := NewDiscoveryCluster(disco)

	namespaced := &kyvernov1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team"}, Spec: spec}
	faults, err := KindFaults(namespaced, cluster)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"spec.rules[0].match.any[0].resources.kinds[1]": "Cluster wide resource 'Namespace' not allowed in namespaced policy",
		"spec.rules[0].match.any[0].resources.kinds[2]": "Cluster wide resource 'v1/Namespace' not allowed in namespaced policy",
		"spec.rules[0].exclude.resources.kinds[0]":      "Cluster wide resource 'Namespace' not allowed in namespaced policy",
	}
	got := map[string]string{}
	for _, f := range faults {
		got[f.Field] = f.Fault
	}
	if len(got) != len(want) {
		t.Fatalf("faults %v, want %v", faults, want)
	}
	for field, fault := range want {
		if got[field] != fault {
			t.Errorf("%s: got %q, want %q", field, got[field], fault)
		}
	}

	cluster2 := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: spec}
	if faults, err := KindFaults(cluster2, cluster); err != nil || len(faults) > 0 {
		t.Fatalf("a ClusterPolicy naming cluster-scoped kinds: %v, %v", faults, err)
	}
}
