package server

import (
	"bytes"
	"strings"
	"testing"
)

// httpPolicy is a ValidatingPolicy (KIND) whose variable is CALL: a
// call of the CEL http library (withHTTP) or not.
const httpPolicy = `
apiVersion: policies.kyverno.io/v1
kind: KIND
metadata: {name: remote, NAMESPACE}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  variables:
  - name: verdict
    expression: "CALL"
  validations:
  - expression: "variables.verdict != null"
`

// TestPolicyValidateNamespacedHTTP: a namespaced policies.kyverno.io
// policy whose expressions call the CEL http library is refused, naming
// the policy and the field, unless the process allows it
// (--allow-http-in-namespaced-policies), as Kyverno refuses it without
// --allowHTTPInNamespacedPolicies; a cluster-wide one, and a namespaced
// one without http, are admitted either way.
func TestPolicyValidateNamespacedHTTP(t *testing.T) {
	const refusal = `NamespacedValidatingPolicy "shop/remote": spec.variables[0].expression: http.* is not allowed in namespaced policies; set --allow-http-in-namespaced-policies to enable`
	review := func(kind, call string) []byte {
		ns := "namespace: shop"
		if kind == "ValidatingPolicy" {
			ns = ""
		}
		manifest := strings.NewReplacer("KIND", kind, "NAMESPACE", ns, "CALL", call).Replace(httpPolicy)
		body := policyReview(t, kind, "CREATE", manifest)
		return bytes.Replace(body, []byte(`"group":"kyverno.io"`), []byte(`"group":"policies.kyverno.io"`), 1)
	}
	const withHTTP, withoutHTTP = "http.Get('https://verdicts.example/' + object.metadata.name)", "object.metadata.name"
	for _, c := range []struct {
		name, kind, call string
		allow            bool
		wantRefusal      string
	}{
		{"namespaced with http, not allowed", "NamespacedValidatingPolicy", withHTTP, false, refusal},
		{"namespaced with http, allowed", "NamespacedValidatingPolicy", withHTTP, true, ""},
		{"namespaced without http", "NamespacedValidatingPolicy", withoutHTTP, false, ""},
		{"cluster-wide with http", "ValidatingPolicy", withHTTP, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}, HTTPInNamespacedPolicies: c.allow})
			resp := decision(t, h, PathPolicyValidate, review(c.kind, c.call))
			if c.wantRefusal == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result.Message != c.wantRefusal {
				t.Fatalf("Allowed %v, message %q; want refused with %q", resp.Allowed, resp.Result.Message, c.wantRefusal)
			}
		})
	}
}
