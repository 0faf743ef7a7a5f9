package engine

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/internal/manifesttest"
)

type manifestCases struct {
	Policy json.RawMessage `json:"policy"`
	Signed map[string]any  `json:"signed"`
	Cases  []struct {
		Name     string            `json:"name"`
		SignWith string            `json:"signWith"`
		Resource map[string]any    `json:"resource"`
		Want     review.RuleStatus `json:"want"`
		Message  string            `json:"message"`
	} `json:"cases"`
}

// TestValidateManifests signs a manifest with a generated key and checks
// validate.manifests against resources that match it, differ from it, are
// signed by an untrusted key or not at all.
func TestValidateManifests(t *testing.T) {
	data, err := os.ReadFile("testdata/manifests/cases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var mc manifestCases
	if err := yaml.Unmarshal(data, &mc); err != nil {
		t.Fatal(err)
	}
	trusted, second, other := manifesttest.NewKey(t), manifesttest.NewKey(t), manifesttest.NewKey(t)
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	raw := strings.ReplaceAll(string(mc.Policy), `"TRUSTED"`, quote(trusted.PublicPEM))
	raw = strings.ReplaceAll(raw, `"SECOND"`, quote(second.PublicPEM))
	set, err := Compile(decodePolicies(t, []json.RawMessage{json.RawMessage(raw)}))
	if err != nil {
		t.Fatal(err)
	}
	signedYAML, err := yaml.Marshal(mc.Signed)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mc.Cases {
		t.Run(c.Name, func(t *testing.T) {
			obj := deepCopyJSON(t, c.Resource)
			var ann map[string]string
			switch c.SignWith {
			case "trusted":
				ann = manifesttest.Annotations(t, trusted, "", signedYAML)
			case "other":
				ann = manifesttest.Annotations(t, other, "", signedYAML)
			}
			if ann != nil {
				meta := obj["metadata"].(map[string]any)
				a := map[string]any{}
				for k, v := range ann {
					a[k] = v
				}
				meta["annotations"] = a
			}
			resp := set.Validate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: obj})
			if len(resp.Policies) != 1 || len(resp.Policies[0].Rules) != 1 {
				t.Fatalf("response: %+v", resp.Policies)
			}
			r := resp.Policies[0].Rules[0]
			if r.Status != c.Want || (c.Message != "" && r.Message != c.Message) {
				t.Errorf("got %s %q, want %s %q", r.Status, r.Message, c.Want, c.Message)
			}
		})
	}
}

// TestValidateManifestsRefusesWhatItCannotVerify: attestors charter cannot
// check without I/O make the policy a compile error, never a pass.
func TestValidateManifestsRefusesWhatItCannotVerify(t *testing.T) {
	for name, manifests := range map[string]string{
		"keyless":     `{attestors: [{entries: [{keyless: {subject: x, issuer: y}}]}]}`,
		"secret key":  `{attestors: [{entries: [{keys: {secret: {name: k, namespace: n}}}]}]}`,
		"not a key":   `{attestors: [{entries: [{keys: {publicKeys: "k"}}]}]}`,
		"count":       `{attestors: [{count: 2, entries: [{keys: {publicKeys: "k"}}]}]}`,
		"dry run":     `{dryRun: {enable: true}, attestors: [{entries: [{keys: {publicKeys: "k"}}]}]}`,
		"no attestor": `{}`,
	} {
		var p kyvernov1.ClusterPolicy
		err := yaml.UnmarshalStrict([]byte(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: verify}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Deployment]}}]}
    validate: {manifests: `+manifests+`}
`), &p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Compile([]kyvernov1.PolicyInterface{&p}); err == nil || !strings.Contains(err.Error(), "spec.rules[0].validate.manifests") {
			t.Errorf("%s: compile error %v, want one naming spec.rules[0].validate.manifests", name, err)
		}
	}
}

func deepCopyJSON(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
