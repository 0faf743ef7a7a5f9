package server

import (
	"bytes"
	"os"
	"path/filepath"
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

// TestPolicyValidateNamespacedServiceCalls: a kyverno.io Policy (a
// tenant's) whose context entries call a service URL, in a rule, a
// foreach at any depth or a mutate target, is refused naming each field,
// unless the process allows it; a ClusterPolicy with the same entries is
// the platform's and is admitted.
func TestPolicyValidateNamespacedServiceCalls(t *testing.T) {
	manifest, err := os.ReadFile(filepath.Join("testdata", "namespacedcalls", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const refusal = "a namespaced policy may not call out (charter serve --allow-http-in-namespaced-policies)"
	want := strings.Join([]string{
		`Policy "team-a/steal": spec.rules[0].context[1].apiCall.service.url: ` + refusal,
		`Policy "team-a/steal": spec.rules[0].validate.foreach[0].context[0].apiCall.service.url: ` + refusal,
		`Policy "team-a/steal": spec.rules[0].validate.foreach[0].foreach[0].context[0].apiCall.service.url: ` + refusal,
		`Policy "team-a/steal": spec.rules[1].mutate.targets[0].context[0].apiCall.service.url: ` + refusal,
	}, "; ")
	cluster := strings.Replace(strings.Replace(string(manifest), "kind: Policy", "kind: ClusterPolicy", 1), "namespace: team-a}", "}", 1)
	for _, c := range []struct {
		name, kind, manifest string
		allow                bool
		wantRefusal          string
	}{
		{"namespaced, not allowed", "Policy", string(manifest), false, want},
		{"namespaced, allowed", "Policy", string(manifest), true, ""},
		{"cluster-wide", "ClusterPolicy", cluster, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}, HTTPInNamespacedPolicies: c.allow})
			resp := decision(t, h, PathPolicyValidate, policyReview(t, c.kind, "CREATE", c.manifest))
			if c.wantRefusal == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result.Message != c.wantRefusal {
				t.Fatalf("Allowed %v, message\n%q\nwant refused with\n%q", resp.Allowed, resp.Result.Message, c.wantRefusal)
			}
		})
	}
}

// TestPolicyValidateNamespacedCleanupServiceCall: a CleanupPolicy's own
// context list is a place to call out from too.
func TestPolicyValidateNamespacedCleanupServiceCall(t *testing.T) {
	const manifest = `
apiVersion: kyverno.io/v2
kind: CleanupPolicy
metadata: {name: sweep, namespace: team-a}
spec:
  schedule: "*/5 * * * *"
  match: {any: [{resources: {kinds: [ConfigMap]}}]}
  context:
  - name: tok
    apiCall:
      service: {url: "http://127.0.0.1:8080/token"}
  conditions:
    any:
    - {key: "{{ tok.token }}", operator: Equals, value: "x"}
`
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}})
	resp := decision(t, h, PathPolicyValidate, policyReview(t, "CleanupPolicy", "CREATE", manifest))
	const want = `CleanupPolicy "team-a/sweep": spec.context[0].apiCall.service.url: a namespaced policy may not call out (charter serve --allow-http-in-namespaced-policies)`
	if resp.Allowed || resp.Result.Message != want {
		t.Fatalf("Allowed %v, message %q; want refused with %q", resp.Allowed, resp.Result.Message, want)
	}
}
