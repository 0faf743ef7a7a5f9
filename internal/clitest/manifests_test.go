package clitest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/manifesttest"
)

// TestValidateManifestsSuite runs a suite with a validate.manifests rule as
// `charter test` does: a ConfigMap signed with the policy's key passes,
// one changed after signing and an unsigned one fail, and a suite that
// expects the tampered one to pass fails.
func TestValidateManifestsSuite(t *testing.T) {
	key := manifesttest.NewKey(t)
	dir := t.TempDir()
	write := fileWriter(t, dir)
	pem, _ := json.Marshal(key.PublicPEM)
	write("policy.yaml", `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: signed-configmaps}
spec:
  validationFailureAction: Enforce
  rules:
  - name: signed
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      manifests:
        attestors:
        - entries:
          - keys: {publicKeys: `+string(pem)+`}
`)
	configMap := func(name, mode string, annotations map[string]string) string {
		obj := map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"data":     map[string]any{"mode": mode},
		}
		if annotations != nil {
			obj["metadata"].(map[string]any)["annotations"] = annotations
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sign := func(name string) map[string]string {
		return manifesttest.Annotations(t, key, "", []byte(configMap(name, "safe", nil)))
	}
	write("resources.yaml", strings.Join([]string{
		configMap("good", "safe", sign("good")),
		configMap("tampered", "unsafe", sign("tampered")),
		configMap("unsigned", "safe", nil),
	}, "---\n"))
	suite := func(tamperedResult string) {
		write(DefaultFileName, `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: manifests}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: signed-configmaps, rule: signed, resources: [good], kind: ConfigMap, result: pass}
- {policy: signed-configmaps, rule: signed, resources: [unsigned], kind: ConfigMap, result: fail}
- {policy: signed-configmaps, rule: signed, resources: [tampered], kind: ConfigMap, result: `+tamperedResult+`}
`)
	}
	run := func() []Row {
		t.Helper()
		results, err := NewRunner(Options{FileName: DefaultFileName}).Run(context.Background(), []string{dir})
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 1 || results[0].Err != nil {
			t.Fatalf("results: %+v", results)
		}
		return results[0].Rows
	}
	suite("fail")
	if c := count(run()); c.Failed != 0 || c.Passed != 3 {
		t.Fatalf("rows: %+v", c)
	}
	suite("pass")
	rows := run()
	if c := count(rows); c.Failed != 1 || c.Passed != 2 {
		t.Fatalf("a tampered ConfigMap expected to pass did not fail the suite: %+v", rows)
	}
}
