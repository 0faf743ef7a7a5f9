package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// sameNamePolicies are a ClusterPolicy and the ValidatingPolicy of one
// name a user moving to the CEL kinds one policy at a time has installed
// together; each checks its own label, so a Pod can fail either or both.
const sameNamePolicies = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-labels}
spec:
  validationFailureAction: Enforce
  rules:
  - name: team
    match:
      any:
      - resources: {kinds: [Pod], namespaces: [same-name]}
    validate:
      message: the ClusterPolicy wants a team label
      pattern: {metadata: {labels: {team: "?*"}}}
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: require-labels}
spec:
  validationActions: [Deny]
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: same-name}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
    message: the ValidatingPolicy wants an owner label
`

// TestSameNamePoliciesOnRealAPIServer: a ClusterPolicy and a
// ValidatingPolicy of one name are both Ready and both enforced, each
// denying with its own message, under the one name users know.
func TestSameNamePoliciesOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withNamespaces("same-name"))
	ctx, cl := f.ctx, f.client
	f.installReady(t, sameNamePolicies)

	denial := func(labels map[string]string) string {
		t.Helper()
		var msg string
		eventually(t, fmt.Sprintf("Pod labelled %v denied", labels), 30*time.Second, func() error {
			p := podIn("web", "same-name", labels)
			err := cl.Create(ctx, p)
			if err == nil {
				_ = cl.Delete(ctx, p)
				return errNotYet("admitted")
			}
			msg = err.Error()
			return nil
		})
		return msg
	}
	const cpMessage, vpMessage = "the ClusterPolicy wants a team label", "Policy require-labels failed: the ValidatingPolicy wants an owner label"
	for _, c := range []struct {
		name     string
		labels   map[string]string
		want     []string
		wantNone string
	}{
		{"failing both, both messages", nil, []string{cpMessage, vpMessage}, ""},
		{"failing the ClusterPolicy only", map[string]string{"owner": "a"}, []string{cpMessage}, vpMessage},
		{"failing the ValidatingPolicy only", map[string]string{"team": "a"}, []string{vpMessage}, cpMessage},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := denial(c.labels)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("denial %q lacks %q", got, w)
				}
			}
			if c.wantNone != "" && strings.Contains(got, c.wantNone) {
				t.Errorf("denial %q names the policy the Pod passes: %q", got, c.wantNone)
			}
		})
	}
	t.Run("passing both is admitted", func(t *testing.T) {
		if err := cl.Create(ctx, podIn("web", "same-name", map[string]string{"team": "a", "owner": "b"})); err != nil {
			t.Fatal(err)
		}
	})
}
