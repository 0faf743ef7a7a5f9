package background

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/policyid"
)

// TestOwnsDownstream is the ownership rule of downstream objects, without
// an API server: LabelPolicyKind decides when present; without it, an
// object is its policy's unless a policy of the other generating kind and
// the same name, installed (served or held), has a generate rule of the
// object's rule name.
func TestOwnsDownstream(t *testing.T) {
	read := func(file string, into any) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			t.Fatal(err)
		}
	}
	cpol := &kyvernov1.ClusterPolicy{}
	read("samename-cpol.yaml", cpol)
	cpol.Spec.Rules[0].Name = "same-gen"
	gpol := &policiesv1.GeneratingPolicy{}
	read("samename-gpol.yaml", gpol)
	// A Policy and a NamespacedGeneratingPolicy of one namespace and name
	// are a pair too; a ClusterPolicy is not the Policy's other kind.
	nspol := &kyvernov1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "same-gen"}, Spec: cpol.Spec}
	nsgpol := &policiesv1.NamespacedGeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "same-gen"}, Spec: gpol.Spec}

	labels := func(ns, rule, kind string) map[string]string {
		l := map[string]string{
			"generate.kyverno.io/policy-name":      "same-gen",
			"generate.kyverno.io/policy-namespace": ns,
			"generate.kyverno.io/rule-name":        rule,
		}
		if kind != "" {
			l[LabelPolicyKind] = kind
		}
		return l
	}
	for _, tc := range []struct {
		name      string
		installed []kyvernov1.PolicyInterface
		held      bool
		labels    map[string]string
		p         kyvernov1.PolicyInterface
		rule      string
		want      bool
	}{
		{name: "kind label names the policy's kind", installed: []kyvernov1.PolicyInterface{cpol, gpol},
			labels: labels("", "same-gen", "ClusterPolicy"), p: cpol, rule: "same-gen", want: true},
		{name: "kind label names the other kind", installed: []kyvernov1.PolicyInterface{cpol, gpol},
			labels: labels("", "same-gen", "GeneratingPolicy"), p: cpol, rule: "same-gen", want: false},
		{name: "kind label of the policy, other rule", installed: []kyvernov1.PolicyInterface{cpol},
			labels: labels("", "configmap", "ClusterPolicy"), p: cpol, rule: "same-gen", want: false},
		{name: "any rule", installed: []kyvernov1.PolicyInterface{cpol},
			labels: labels("", "configmap", "ClusterPolicy"), p: cpol, rule: "", want: true},
		{name: "other policy namespace", installed: []kyvernov1.PolicyInterface{cpol},
			labels: labels("team", "same-gen", "ClusterPolicy"), p: cpol, rule: "same-gen", want: false},
		{name: "no kind label, the policy alone", installed: []kyvernov1.PolicyInterface{cpol},
			labels: labels("", "same-gen", ""), p: cpol, rule: "same-gen", want: true},
		{name: "no kind label, deleted policy, nothing installed", installed: nil,
			labels: labels("", "same-gen", ""), p: gpol, rule: "same-gen", want: true},
		{name: "no kind label, both have the rule: not the ClusterPolicy's", installed: []kyvernov1.PolicyInterface{cpol, gpol},
			labels: labels("", "same-gen", ""), p: cpol, rule: "same-gen", want: false},
		{name: "no kind label, both have the rule: not the GeneratingPolicy's", installed: []kyvernov1.PolicyInterface{cpol, gpol},
			labels: labels("", "same-gen", ""), p: gpol, rule: "same-gen", want: false},
		{name: "no kind label, the other no longer compiles but is installed", installed: []kyvernov1.PolicyInterface{gpol}, held: true,
			labels: labels("", "same-gen", ""), p: cpol, rule: "same-gen", want: false},
		{name: "no kind label, the other kind's rule has another name", installed: []kyvernov1.PolicyInterface{gpol},
			labels: labels("", "configmap", ""), p: withRule(cpol, "configmap"), rule: "configmap", want: true},
		{name: "no kind label, namespaced pair", installed: []kyvernov1.PolicyInterface{nspol, nsgpol},
			labels: labels("team", "same-gen", ""), p: nspol, rule: "same-gen", want: false},
		{name: "no kind label, a ClusterPolicy of the name is not a Policy's namesake", installed: []kyvernov1.PolicyInterface{nspol, cpol},
			labels: labels("team", "same-gen", ""), p: nspol, rule: "same-gen", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := &compiledPolicies{byID: map[string]kyvernov1.PolicyInterface{}, held: map[string]kyvernov1.PolicyInterface{}}
			for _, p := range tc.installed {
				if tc.held {
					cp.held[policyid.Of(p)] = p
				} else {
					cp.byID[policyid.Of(p)] = p
				}
			}
			c := &Controller{}
			c.compiled.Store(cp)
			if got := c.ownsDownstream(tc.labels, tc.p, tc.rule); got != tc.want {
				t.Errorf("ownsDownstream(%v, %s %s, rule %q) = %v, want %v", tc.labels, tc.p.GetKind(), tc.p.GetName(), tc.rule, got, tc.want)
			}
		})
	}
}

func withRule(p *kyvernov1.ClusterPolicy, name string) *kyvernov1.ClusterPolicy {
	out := p.DeepCopy()
	out.Spec.Rules[0].Name = name
	return out
}
