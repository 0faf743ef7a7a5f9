package mutate

import (
	"errors"
	"testing"

	"sigs.k8s.io/yaml"
)

const fuzzPod = `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: web}, annotations: {a: b}}
spec:
  nodeSelector: {disk: ssd}
  tolerations: [{key: k, operator: Exists}]
  volumes: [{name: v, emptyDir: {}}, {name: h, hostPath: {path: /x}}]
  containers:
  - name: c1
    image: "nginx:latest"
    env: [{name: A, value: "1"}]
    ports: [{containerPort: 80}]
    volumeMounts: [{name: v, mountPath: /v}]
  - {name: c2, image: "redis:7", imagePullPolicy: Never}
`

// FuzzStrategicMerge feeds random YAML patches to StrategicMerge: it may return an
// error, but must not panic, must leave its arguments alone, and must return a
// resource whenever it returns no error.
func FuzzStrategicMerge(f *testing.F) {
	for _, seed := range []string{
		`{metadata: {labels: {+(x): y}}}`,
		`{spec: {containers: [{(name): "*", +(imagePullPolicy): Always}]}}`,
		`{spec: {containers: [{<(image): "*:latest"}], nodeSelector: {$patch: delete}}}`,
		`{spec: {(nodeSelector): {(disk): ssd}, volumes: [{name: s, emptyDir: {}}]}}`,
		`{spec: {containers: [{name: c2, $patch: delete}, {$patch: replace}]}}`,
		`{spec: {containers: [{(image): ">1 | <0 & !*"}, {(name): c2, x: [1, {a: null}]}]}}`,
		`{spec: {tolerations: [], "=(a)": 1, "X(b)": null, "^(c)": [1]}}`,
		`{spec: {nodeSelector: oops}}`,
		`{spec: {containers: [[1]], volumes: [1, {name: v}]}}`,
		`{metadata: {(labels): {(app): "a-b"}, (name): "1-2", (x): "1h!-2h"}}`,
	} {
		f.Add(seed)
	}
	resource := mustYAML(f, fuzzPod)
	f.Fuzz(func(t *testing.T, text string) {
		var patch map[string]any
		if err := yaml.Unmarshal([]byte(text), &patch); err != nil {
			return
		}
		patchCopy := deepCopy(patch)
		got, err := StrategicMerge(resource, patch)
		if !Equal(resource, mustYAML(t, fuzzPod)) {
			t.Fatalf("resource argument modified by patch %q", text)
		}
		if !Equal(patch, patchCopy) {
			t.Fatalf("patch argument modified: %q", text)
		}
		var ce *ConditionError
		if errors.As(err, &ce) && !Equal(got, resource) {
			t.Fatalf("skipped patch %q changed the resource", text)
		}
		if err == nil && got == nil {
			t.Fatalf("nil result without error for %q", text)
		}
	})
}
