package server

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/clusterstate/policycache"
)

func policyReview(t *testing.T, kind, operation, manifest string) []byte {
	t.Helper()
	obj, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]any{
		"uid":       "uid-policy",
		"kind":      map[string]any{"group": "kyverno.io", "version": "v1", "kind": kind},
		"operation": operation,
		"object":    json.RawMessage(obj),
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	return body
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name        string
		kind        string
		manifest    string
		wantAllowed bool
		wantMessage []string
		// wantWarning, when set, is the one warning an admitted policy gets.
		wantWarning string
	}{
		{
			name: "valid ClusterPolicy", kind: "ClusterPolicy", wantAllowed: true,
			manifest: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: ok}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {labels: {app: "?*"}}}}
`,
		},
		{
			name: "unknown anchor is refused with its field path", kind: "ClusterPolicy",
			manifest: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: bad-anchor}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {spec: {containers: [{"~(x)": "y"}]}}}
`,
			wantMessage: []string{`ClusterPolicy "bad-anchor": spec.rules[0].validate.pattern.spec.containers[0]`},
		},
		{
			name: "unknown field is refused with its path", kind: "Policy",
			manifest: `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: typo, namespace: team}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {patern: {}}
`,
			wantMessage: []string{`Policy "team/typo"`, `spec.rules[0].validate.patern`},
		},
		{
			name: "invalid PolicyException", kind: "PolicyException",
			manifest: `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: ex, namespace: team}
spec:
  match: {any: [{resources: {kinds: [Pod]}}]}
  exceptions:
  - ruleNames: [r]
`,
			wantMessage: []string{`PolicyException "team/ex"`, "spec.exceptions[0].policyName"},
		},
		{
			name: "an exception from a trusted namespace is admitted without warnings", kind: "PolicyException", wantAllowed: true,
			manifest: `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: ex, namespace: charter}
spec:
  match: {any: [{resources: {kinds: [Pod]}}]}
  exceptions:
  - {policyName: p, ruleNames: [r]}
`,
		},
		{
			name: "an exception from another namespace is admitted with a warning that it will be ignored", kind: "PolicyException", wantAllowed: true,
			manifest: `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: ex, namespace: team}
spec:
  match: {any: [{resources: {kinds: [Pod]}}]}
  exceptions:
  - {policyName: p, ruleNames: [r]}
`,
			wantWarning: `PolicyException team/ex is ignored: charter honours PolicyExceptions only from namespace charter (--exception-namespaces=charter), not from "team"`,
		},
		{
			name: "Enforce rule charter cannot run is refused with its field", kind: "ClusterPolicy",
			manifest: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: verify}
spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {assert: {object: {spec: {}}}}
`,
			wantMessage: []string{`ClusterPolicy "verify": spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet`},
		},
		{
			name: "Audit rule charter cannot run in the cluster is admitted with a warning", kind: "Policy", wantAllowed: true,
			manifest: `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: global, namespace: team}
spec:
  validationFailureAction: Audit
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    context: [{name: g, globalReference: {name: allowed}}]
    validate: {deny: {}}
`,
			wantWarning: `Policy "team/global": spec.rules[0].context[0].globalReference: context entry globalReference (no GlobalContextEntry support) is not supported by charter in the cluster yet; admitted as its rule only audits, and its status shows Ready=False, reason Unsupported`,
		},
		{
			name: "a policy charter runs in the cluster is admitted without warnings", kind: "ClusterPolicy", wantAllowed: true,
			manifest: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: supported}
spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    context: [{name: cm, configMap: {name: c, namespace: team}}]
    validate: {deny: {}}
`,
		},
		{
			name: "valid ClusterCleanupPolicy with @every", kind: "ClusterCleanupPolicy", wantAllowed: true,
			manifest: `
apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata: {name: ok}
spec:
  schedule: "@every 10m"
  match: {any: [{resources: {kinds: [ConfigMap]}}]}
`,
		},
		{
			name: "unparseable schedule is refused with its field path", kind: "CleanupPolicy",
			manifest: `
apiVersion: kyverno.io/v2
kind: CleanupPolicy
metadata: {name: cron, namespace: team}
spec:
  schedule: "*/5 * * *"
  match: {any: [{resources: {kinds: [ConfigMap]}}]}
`,
			wantMessage: []string{`CleanupPolicy "team/cron": spec.schedule: invalid schedule "*/5 * * *"`},
		},
	}
	trusted, err := policycache.ParseExceptionNamespaces([]string{"charter"})
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}, ExceptionNamespaces: &trusted})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := decision(t, h, PathPolicyValidate, policyReview(t, tt.kind, "CREATE", tt.manifest))
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("Allowed = %v, want %v (%+v)", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			if tt.wantWarning != "" && (len(resp.Warnings) != 1 || resp.Warnings[0] != tt.wantWarning) {
				t.Errorf("warnings %q, want [%q]", resp.Warnings, tt.wantWarning)
			}
			if tt.wantWarning == "" && len(resp.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", resp.Warnings)
			}
			for _, want := range tt.wantMessage {
				if !strings.Contains(resp.Result.Message, want) {
					t.Errorf("message %q does not contain %q", resp.Result.Message, want)
				}
			}
		})
	}
}
