package config

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

func staged(p *kyvernov1.ClusterPolicy) *kyvernov1.ClusterPolicy {
	p.Labels = map[string]string{"charter.dev/staged": "true"}
	return p
}

func TestPromotionWebhook(t *testing.T) {
	no := false
	plain := clusterPolicy("plain", validateRule(nil, "Pod"), nil)
	stagedPods := staged(clusterPolicy("staged", validateRule(nil, "Pod"), nil))
	stagedBackgroundOnly := staged(clusterPolicy("staged-background", validateRule(nil, "Pod"), func(s *kyvernov1.Spec) { s.Admission = &no }))
	for _, tc := range []struct {
		name      string
		policies  []kyvernov1.PolicyInterface
		promotion bool
		want      bool
	}{
		{name: "no staged policy", policies: []kyvernov1.PolicyInterface{plain}, promotion: true},
		{name: "a staged policy", policies: []kyvernov1.PolicyInterface{plain, stagedPods}, promotion: true, want: true},
		{name: "a staged policy, server without gate", policies: []kyvernov1.PolicyInterface{stagedPods}},
		{name: "a staged policy that skips admission", policies: []kyvernov1.PolicyInterface{stagedBackgroundOnly}, promotion: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Settings{Target: Target{URL: "https://127.0.0.1:9443"}, CABundle: []byte("ca"),
				ExcludedNamespaces: []string{"kube-system", "charter"}, Promotion: tc.promotion}
			cfgs, err := Build(tc.policies, resolver, s)
			if err != nil {
				t.Fatal(err)
			}
			var got *admissionregistrationv1.ValidatingWebhook
			for i := range cfgs.Validating.Webhooks {
				if w := &cfgs.Validating.Webhooks[i]; w.Name == PromotionWebhook {
					got = w
				}
			}
			if (got != nil) != tc.want {
				t.Fatalf("promotion webhook present %v, want %v", got != nil, tc.want)
			}
			if got == nil {
				return
			}
			if u := got.ClientConfig.URL; u == nil || *u != "https://127.0.0.1:9443/promotion" {
				t.Errorf("URL %v, want https://127.0.0.1:9443/promotion", u)
			}
			if len(got.Rules) != 1 || got.Rules[0].Resources[0] != "namespaces" || len(got.Rules[0].Resources) != 1 ||
				len(got.Rules[0].Operations) != 2 || got.Rules[0].Operations[0] != "CREATE" || got.Rules[0].Operations[1] != "UPDATE" {
				t.Errorf("rules %+v, want namespaces CREATE and UPDATE", got.Rules)
			}
			if got.FailurePolicy == nil || *got.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("failure policy %v, want Fail", got.FailurePolicy)
			}
			sel := got.ObjectSelector
			if sel == nil || len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].Key != "charter.dev/enforcement" ||
				sel.MatchExpressions[0].Operator != "Exists" {
				t.Errorf("object selector %+v, want charter.dev/enforcement Exists", sel)
			}
			if len(got.NamespaceSelector.MatchExpressions) != 2 {
				t.Errorf("namespace selector %+v, want kube-system and charter left out", got.NamespaceSelector)
			}
		})
	}
}
