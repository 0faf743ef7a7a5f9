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
