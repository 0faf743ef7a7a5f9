package engine

import (
	"context"
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/webhookmatch"
)

// conditionedPolicy denies team a's Pods through its webhook
// matchConditions; authorizer-gated adds a condition only the API server
// can evaluate.
const conditionedPolicies = `
- apiVersion: kyverno.io/v1
  kind: ClusterPolicy
  metadata: {name: team-a}
  spec:
    webhookConfiguration:
      matchConditions:
      - {name: team, expression: "object.metadata.labels['team'] == 'a'"}
    rules:
    - name: deny
      match: {any: [{resources: {kinds: [Pod]}}]}
      validate: {failureAction: Enforce, deny: {}}
- apiVersion: kyverno.io/v1
  kind: ClusterPolicy
  metadata: {name: authorizer-gated}
  spec:
    webhookConfiguration:
      matchConditions:
      - {name: can-delete, expression: "authorizer.group('').resource('pods').check('delete').allowed()"}
    rules:
    - name: deny
      match: {any: [{resources: {kinds: [Pod]}}]}
      validate: {failureAction: Enforce, deny: {}}
- apiVersion: kyverno.io/v1
  kind: ClusterPolicy
  metadata: {name: plain}
  spec:
    rules:
    - name: deny
      match: {any: [{resources: {kinds: [Pod]}}]}
      validate: {failureAction: Enforce, deny: {}}
`

// TestWebhookConditions: outside admission (background scans, the
// background controller, the CLI) the engine evaluates a policy's webhook
// matchConditions before the policy runs, as Kyverno's engine does: a
// false condition, or one it cannot evaluate (a missing label, the
// authorizer it has no way to bind), leaves the policy out. At admission
// (WithWebhookConditionsMet) the API server has already evaluated them,
// authorizer included, so every policy the request reached runs.
func TestWebhookConditions(t *testing.T) {
	var raws []json.RawMessage
	if err := yaml.Unmarshal([]byte(conditionedPolicies), &raws); err != nil {
		t.Fatal(err)
	}
	set, err := Compile(decodePolicies(t, raws))
	if err != nil {
		t.Fatal(err)
	}
	podWith := func(labels map[string]any) *review.Request {
		return &review.Request{Operation: kyvernov1.Create, Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": "default", "labels": labels}}}
	}
	for _, c := range []struct {
		name string
		req  *review.Request
		opts []EvalOption
		want []string
	}{
		{"background: conditions hold", podWith(map[string]any{"team": "a"}), nil, []string{"team-a", "plain"}},
		{"background: a condition is false", podWith(map[string]any{"team": "b"}), nil, []string{"plain"}},
		{"background: a condition errs (no such label)", podWith(map[string]any{}), nil, []string{"plain"}},
		{"admission: the API server evaluated them", podWith(map[string]any{"team": "b"}), []EvalOption{WithWebhookConditionsMet()}, []string{"team-a", "authorizer-gated", "plain"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := func(entry string, policies []review.PolicyResponse) {
				t.Helper()
				var got []string
				for _, p := range policies {
					got = append(got, p.Key)
				}
				if len(got) != len(c.want) {
					t.Fatalf("%s: policies %v, want %v", entry, got, c.want)
				}
				for i := range got {
					if got[i] != c.want[i] {
						t.Fatalf("%s: policies %v, want %v", entry, got, c.want)
					}
				}
			}
			check("Validate", set.Validate(context.Background(), c.req, c.opts...).Policies)
			check("ValidateTimed", set.ValidateTimed(context.Background(), c.req, c.opts...).Policies)
			var one []review.PolicyResponse
			for _, p := range set.Policies() {
				if pr := p.Validate(context.Background(), c.req, c.opts...); len(pr.Rules) > 0 {
					one = append(one, pr)
				}
			}
			check("Policy.Validate", one)
		})
	}
	if !webhookmatch.Has(set.Policies()[0].Source()) || webhookmatch.Has(set.Policies()[2].Source()) {
		t.Error("HasWebhookConditions: want true for team-a, false for plain")
	}
}
