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
    validate: {assert: {object: {spec: {}}}}
`,
			wantWarning: `Policy "team/global": spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet; admitted as its rule only audits, and its status shows Ready=False, reason Unsupported`,
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
		{
			name: "a valid GlobalContextEntry is admitted", kind: "GlobalContextEntry", wantAllowed: true,
			manifest: `
apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata: {name: registries}
spec:
  kubernetesResource: {version: v1, resource: configmaps, namespace: platform}
  projections: [{name: hosts, jmesPath: "[].data.host"}]
`,
		},
		{
			name: "an invalid GlobalContextEntry is refused naming each field", kind: "GlobalContextEntry",
			manifest: `
apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata: {name: registries}
spec:
  apiCall: {urlPath: api/v1/namespaces, refreshInterval: 1m}
  projections: [{name: a.b, jmesPath: "["}]
`,
			wantMessage: []string{`GlobalContextEntry "registries": spec.apiCall.urlPath: "api/v1/namespaces": want an absolute path such as /api/v1/namespaces`,
				`GlobalContextEntry "registries": spec.projections[0].name: "a.b": must not contain a dot (policies read it as <entry>.<projection>)`,
				`GlobalContextEntry "registries": spec.projections[0].jmesPath: "[": `},
		},
		{
			name: "a GlobalContextEntry with an unknown field is refused", kind: "GlobalContextEntry",
			manifest: `
apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata: {name: typo}
spec:
  kubernetesResource: {version: v1, resources: configmaps}
`,
			wantMessage: []string{`GlobalContextEntry "typo": unknown field "spec.kubernetesResource.resources"`},
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

// generatePolicy is a ClusterPolicy with two generate rules; each case
// of TestPolicyValidateGenerateUpdate edits it.
const generatePolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: gen}
spec:
  rules:
  - name: netpol
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      synchronize: SYNC
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: NAME
      namespace: "{{request.object.metadata.name}}"
      data: {spec: {podSelector: {}, policyTypes: [POLICYTYPE]}}
  - name: quota
    match: {any: [{resources: {kinds: [KIND]}}]}
    generate:
      synchronize: SYNC
      orphanDownstreamOnPolicyDelete: true
      apiVersion: v1
      kind: ResourceQuota
      name: QUOTA
      namespace: "{{request.object.metadata.name}}"
      data: {spec: {hard: {pods: "10"}}}
`

func editedGeneratePolicy(edits ...string) string {
	m := map[string]string{"SYNC": "true", "NAME": "default-deny", "POLICYTYPE": "Ingress", "KIND": "Namespace", "QUOTA": "quota"}
	for i := 0; i+1 < len(edits); i += 2 {
		m[edits[i]] = edits[i+1]
	}
	out := generatePolicy
	for k, v := range m {
		out = strings.ReplaceAll(out, k, v)
	}
	return out
}

func policyUpdateReview(t *testing.T, kind, oldManifest, newManifest string) []byte {
	t.Helper()
	toJSON := func(m string) json.RawMessage {
		raw, err := yaml.YAMLToJSON([]byte(m))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	req := map[string]any{
		"uid":       "uid-policy",
		"kind":      map[string]any{"group": "kyverno.io", "version": "v1", "kind": kind},
		"operation": "UPDATE",
		"object":    toJSON(newManifest),
		"oldObject": toJSON(oldManifest),
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	return body
}

// TestPolicyValidateGenerateUpdate: a policy update may change a generate
// rule's data and (with a warning saying what becomes of the old objects)
// its target, but not the rest of a kept generate rule
// (background-cleanup.md §3.4).
func TestPolicyValidateGenerateUpdate(t *testing.T) {
	tests := []struct {
		name     string
		kind     string
		old, cur string
		// wantDenied are parts of the denial message; none: allowed.
		wantDenied []string
		// wantWarnings are parts of the one warning expected.
		wantWarnings []string
	}{
		{name: "data change", old: editedGeneratePolicy(), cur: editedGeneratePolicy("POLICYTYPE", "Egress")},
		{name: "synchronize turned off", old: editedGeneratePolicy(), cur: editedGeneratePolicy("SYNC", "false")},
		{
			name: "new target name, synchronized: old objects deleted", old: editedGeneratePolicy(), cur: editedGeneratePolicy("NAME", "deny-all"),
			wantWarnings: []string{`ClusterPolicy "gen": spec.rules[0] (generate rule "netpol") now generates networking.k8s.io/v1 NetworkPolicy {{request.object.metadata.name}}/deny-all instead of networking.k8s.io/v1 NetworkPolicy {{request.object.metadata.name}}/default-deny: charter's background controller deletes the objects generated from the old target once the new ones exist`},
		},
		{
			name: "new target, orphaned: old objects released", old: editedGeneratePolicy(), cur: editedGeneratePolicy("QUOTA", "pods"),
			wantWarnings: []string{`spec.rules[1] (generate rule "quota") now generates v1 ResourceQuota {{request.object.metadata.name}}/pods instead of`, "releases the objects generated from the old target"},
		},
		{
			name: "match of a kept rule, a rule synchronizes", old: editedGeneratePolicy(), cur: editedGeneratePolicy("KIND", "ConfigMap"),
			wantDenied: []string{`ClusterPolicy "gen": spec.rules[1] (generate rule "quota"): changes of immutable fields of a rule spec in a generate rule is disallowed: match changed`, "delete the policy and create it again"},
		},
		{
			name: "match of a kept rule, no rule synchronized", old: editedGeneratePolicy("SYNC", "false"), cur: editedGeneratePolicy("SYNC", "false", "KIND", "ConfigMap"),
		},
		{
			name: "another rule's new target does not excuse a match change", old: editedGeneratePolicy(), cur: editedGeneratePolicy("NAME", "deny-all", "KIND", "ConfigMap"),
			wantDenied: []string{`spec.rules[1] (generate rule "quota")`, "match changed"},
		},
		{
			name: "preconditions added, in a Policy", kind: "Policy",
			old: strings.Replace(editedGeneratePolicy(), "kind: ClusterPolicy\nmetadata: {name: gen}", "kind: Policy\nmetadata: {name: gen, namespace: team}", 1),
			cur: strings.Replace(strings.Replace(editedGeneratePolicy(), "kind: ClusterPolicy\nmetadata: {name: gen}", "kind: Policy\nmetadata: {name: gen, namespace: team}", 1),
				"  - name: netpol\n", "  - name: netpol\n    preconditions: {all: [{key: a, operator: Equals, value: a}]}\n", 1),
			wantDenied: []string{`Policy "team/gen": spec.rules[0] (generate rule "netpol"): changes of immutable fields`, "preconditions changed"},
		},
		{
			name: "a generate rule removed", old: editedGeneratePolicy(),
			cur: editedGeneratePolicy()[:strings.Index(editedGeneratePolicy(), "  - name: quota")],
		},
	}
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind := tt.kind
			if kind == "" {
				kind = "ClusterPolicy"
			}
			resp := decision(t, h, PathPolicyValidate, policyUpdateReview(t, kind, tt.old, tt.cur))
			if resp.Allowed != (len(tt.wantDenied) == 0) {
				t.Fatalf("Allowed = %v, want %v (%+v)", resp.Allowed, len(tt.wantDenied) == 0, resp.Result)
			}
			for _, want := range tt.wantDenied {
				if !strings.Contains(resp.Result.Message, want) {
					t.Errorf("message %q does not contain %q", resp.Result.Message, want)
				}
			}
			if len(tt.wantDenied) == 0 && len(resp.Warnings) != min(len(tt.wantWarnings), 1) {
				t.Fatalf("warnings %q, want one containing %q", resp.Warnings, tt.wantWarnings)
			}
			for _, want := range tt.wantWarnings {
				if !strings.Contains(resp.Warnings[0], want) {
					t.Errorf("warning %q does not contain %q", resp.Warnings[0], want)
				}
			}
		})
	}
}
