package policycache

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
)

func policy(name string, mutate func(*kyvernov1.Spec)) *kyvernov1.ClusterPolicy {
	p := &kyvernov1.ClusterPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{{
			Name:           "r",
			MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}},
			Validation:     &kyvernov1.Validation{Message: "m", Deny: &kyvernov1.Deny{}},
		}}},
	}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func TestBuildSplitsByFailurePolicy(t *testing.T) {
	ignore := kyvernov1.Ignore
	no := false
	s, err := Build([]kyvernov1.PolicyInterface{
		policy("zeta-fail", nil),
		policy("alpha-ignore", func(s *kyvernov1.Spec) {
			s.WebhookConfiguration = &kyvernov1.WebhookConfiguration{FailurePolicy: &ignore}
		}),
		policy("background-only", func(s *kyvernov1.Spec) { s.Admission = &no }),
		policy("broken", func(s *kyvernov1.Spec) { s.Rules[0].MatchResources = kyvernov1.MatchResources{} }),
		policy("beta-fail", nil),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(ps []*engine.Policy) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Key())
		}
		return out
	}
	if got := keys(s.Fail.Policies()); len(got) != 2 || got[0] != "beta-fail" || got[1] != "zeta-fail" {
		t.Errorf("Fail set = %v, want [beta-fail zeta-fail] in name order", got)
	}
	if got := keys(s.Ignore.Policies()); len(got) != 1 || got[0] != "alpha-ignore" {
		t.Errorf("Ignore set = %v", got)
	}
	if len(s.Errors) == 0 || s.Errors[0].Name != "broken" {
		t.Errorf("Errors = %v, want the broken policy's faults", s.Errors)
	}
	if len(s.Policies()) != 3 {
		t.Errorf("Policies() = %d, want 3", len(s.Policies()))
	}
}

func TestEmptyAllowsEverything(t *testing.T) {
	s := Empty()
	if len(s.Policies()) != 0 || s.Fail == nil || s.Ignore == nil {
		t.Errorf("Empty() = %+v", s)
	}
}
