package generate

import (
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

func TestTargetsChanged(t *testing.T) {
	const base = `
synchronize: true
apiVersion: v1
kind: ConfigMap
name: settings
namespace: "{{request.object.metadata.name}}"
data: {data: {a: "1"}}
`
	tests := []struct {
		name, cur string
		want      bool
	}{
		{"same", base, false},
		{"data, synchronize, orphan and generateExisting are not the target", `
synchronize: false
orphanDownstreamOnPolicyDelete: true
generateExisting: true
apiVersion: v1
kind: ConfigMap
name: settings
namespace: "{{request.object.metadata.name}}"
data: {data: {a: "2"}}
`, false},
		{"name", `{apiVersion: v1, kind: ConfigMap, name: other, namespace: "{{request.object.metadata.name}}", data: {}}`, true},
		{"kind", `{apiVersion: v1, kind: Secret, name: settings, namespace: "{{request.object.metadata.name}}", data: {}}`, true},
		{"apiVersion", `{apiVersion: v2, kind: ConfigMap, name: settings, namespace: "{{request.object.metadata.name}}", data: {}}`, true},
		{"namespace", `{apiVersion: v1, kind: ConfigMap, name: settings, namespace: fixed, data: {}}`, true},
		{"clone source", `{apiVersion: v1, kind: ConfigMap, name: settings, namespace: "{{request.object.metadata.name}}", clone: {namespace: platform, name: settings}}`, true},
		{"foreach entry target", `{foreach: [{list: "request.object.spec.x", apiVersion: v1, kind: ConfigMap, name: settings, namespace: "{{request.object.metadata.name}}", data: {}}]}`, true},
	}
	old := generation(t, base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TargetsChanged(old, generation(t, tt.cur)); got != tt.want {
				t.Errorf("TargetsChanged = %v, want %v (old %q, new %q)", got, tt.want, Targets(old), Targets(generation(t, tt.cur)))
			}
		})
	}
	cloneList := func(kinds string) *kyvernov1.Generation {
		return generation(t, `{namespace: team, cloneList: {namespace: platform, kinds: [`+kinds+`], selector: {matchLabels: {copy: "yes"}}}}`)
	}
	if !TargetsChanged(cloneList("v1/Secret"), cloneList("v1/Secret, v1/ConfigMap")) {
		t.Error("a cloneList kind added is not a target change")
	}
	if TargetsChanged(cloneList("v1/Secret"), cloneList("v1/Secret")) {
		t.Error("an unchanged cloneList is a target change")
	}
}

func generation(t *testing.T, manifest string) *kyvernov1.Generation {
	t.Helper()
	var g kyvernov1.Generation
	if err := yaml.UnmarshalStrict([]byte(manifest), &g); err != nil {
		t.Fatal(err)
	}
	return &g
}
