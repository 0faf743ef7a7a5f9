package config

import (
	"fmt"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestNodesAreNeverRouted: charter's request filter admits Nodes without
// evaluating them, so no webhook may route them, or a charter outage under
// failurePolicy Fail stops kubelets from writing their Nodes
// (kyverno#16177). A rule naming Node is not registered; a rule naming
// every resource carries the notNodes condition, even on a policy's own
// webhook that already holds the most conditions the API server takes.
func TestNodesAreNeverRouted(t *testing.T) {
	nodes := fakeResolver{
		"Node":        {{Version: "v1", Resource: "nodes"}},
		"Node/status": {{Version: "v1", Resource: "nodes/status"}},
		"Pod":         {{Version: "v1", Resource: "pods", Namespaced: true}},
	}
	full := make([]admissionregistrationv1.MatchCondition, maxMatchConditions)
	for i := range full {
		full[i] = admissionregistrationv1.MatchCondition{Name: fmt.Sprintf("c%d", i), Expression: "true"}
	}
	tests := []struct {
		name   string
		policy kyvernov1.PolicyInterface
		// webhooks maps each webhook written to its conditions' names.
		webhooks map[string][]string
		// firstExpression, when set, is the first condition's expression.
		firstExpression string
	}{{
		name:     "Node only: no webhook",
		policy:   clusterPolicy("nodes", validateRule(nil, "Node", "Node/status"), nil),
		webhooks: map[string][]string{},
	}, {
		name:     "Node and Pod: the Pod rule alone, no condition",
		policy:   clusterPolicy("nodes-pods", validateRule(nil, "Node", "Pod"), nil),
		webhooks: map[string][]string{ValidateWebhookFail: nil},
	}, {
		name:     "every kind: not Nodes",
		policy:   clusterPolicy("all", validateRule(nil, "*"), nil),
		webhooks: map[string][]string{ValidateWebhookFail: {notNodes.Name}},
	}, {
		name: "every kind, a policy's own webhook with conditions: theirs, then not Nodes",
		policy: clusterPolicy("own", validateRule(nil, "*"), func(s *kyvernov1.Spec) {
			s.WebhookConfiguration = &kyvernov1.WebhookConfiguration{MatchConditions: full[:1]}
		}),
		webhooks: map[string][]string{ValidateWebhookFail + "-finegrained-own": {"c0", notNodes.Name}},
	}, {
		name: "every kind, a policy's own webhook with the most conditions: not Nodes joins the first",
		policy: clusterPolicy("full", validateRule(nil, "*"), func(s *kyvernov1.Spec) {
			s.WebhookConfiguration = &kyvernov1.WebhookConfiguration{MatchConditions: full}
		}),
		webhooks:        map[string][]string{ValidateWebhookFail + "-finegrained-full": names(full)},
		firstExpression: "(" + notNodes.Expression + ") && (true)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgs, err := Build([]kyvernov1.PolicyInterface{tt.policy}, nodes, Settings{Target: Target{URL: "https://127.0.0.1:9443"}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for _, w := range cfgs.Validating.Webhooks {
				got[w.Name] = names(w.MatchConditions)
				for _, r := range w.Rules {
					for _, res := range r.Resources {
						if slices.Contains(r.APIGroups, "") && isNodes("", res) {
							t.Errorf("%s routes %s", w.Name, res)
						}
					}
				}
				if tt.firstExpression != "" && w.MatchConditions[0].Expression != tt.firstExpression {
					t.Errorf("%s: first condition %q, want %q", w.Name, w.MatchConditions[0].Expression, tt.firstExpression)
				}
				if len(w.MatchConditions) > maxMatchConditions {
					t.Errorf("%s: %d conditions, the API server takes %d", w.Name, len(w.MatchConditions), maxMatchConditions)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.webhooks) {
				t.Errorf("webhooks and their conditions:\n got %v\nwant %v", got, tt.webhooks)
			}
			if len(full) != maxMatchConditions || full[0].Expression != "true" {
				t.Fatal("Build changed the policy's conditions")
			}
		})
	}
}

func names(conditions []admissionregistrationv1.MatchCondition) []string {
	var out []string
	for _, c := range conditions {
		out = append(out, c.Name)
	}
	return out
}
