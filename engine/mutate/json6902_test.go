package mutate

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func mustYAML(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test YAML: %v", err)
	}
	return m
}

const json6902Pod = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  labels: {app: web}
spec:
  containers:
  - {name: c1, image: a}
  - {name: c2, image: b}
`

// Spec §3 and §10 row 28 (b1): Kyverno's JSON patch options, case by case.
func TestJSON6902(t *testing.T) {
	tests := []struct {
		name    string
		patch   string
		want    string // YAML of the expected object; empty when the result must equal the input
		wantErr string
	}{
		{
			name:  "row28-b1-remove-missing-key-is-no-op",
			patch: "- {op: remove, path: /metadata/annotations/missing}",
		},
		{
			name:  "row28-b1-remove-index-out-of-range-is-no-op",
			patch: "- {op: remove, path: /spec/containers/7}",
		},
		{
			name:    "row28-b1-replace-missing-path-errors",
			patch:   "- {op: replace, path: /spec/affinity/nodeAffinity, value: {}}",
			wantErr: "replace operation does not apply: doc is missing path: /spec/affinity/nodeAffinity: missing value",
		},
		{
			name:    "row28-b1-replace-missing-key-errors",
			patch:   "- {op: replace, path: /spec/nodeName, value: n1}",
			wantErr: "replace operation does not apply: doc is missing key: /spec/nodeName",
		},
		{
			name:  "row28-b1-add-deep-creates-parents",
			patch: "- {op: add, path: /metadata/annotations/a~1b, value: x}",
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: web}, annotations: {a/b: x}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: b}]}`,
		},
		{
			name:  "row28-b1-add-missing-array-dash-creates-list",
			patch: "- {op: add, path: /spec/tolerations/-, value: {key: k, operator: Exists}}",
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: web}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: b}], tolerations: [{key: k, operator: Exists}]}`,
		},
		{
			name:  "row28-b1-add-dash-appends",
			patch: "- {op: add, path: /spec/containers/-, value: {name: c3, image: c}}",
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: web}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: b}, {name: c3, image: c}]}`,
		},
		{
			name:  "row28-b1-add-minus-one-appends",
			patch: "- {op: add, path: /spec/containers/-1, value: {name: c3, image: c}}",
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: web}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: b}, {name: c3, image: c}]}`,
		},
		{
			name:  "row28-b1-replace-minus-one-is-last",
			patch: "- {op: replace, path: /spec/containers/-1/image, value: z}",
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: web}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: z}]}`,
		},
		{
			name:    "row28-b1-add-beyond-length-errors",
			patch:   "- {op: add, path: /spec/containers/5, value: {name: c9}}",
			wantErr: "invalid index",
		},
		{
			name:  "row28-b1-add-on-existing-key-replaces",
			patch: "- {op: add, path: /metadata/labels/app, value: db}",
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: db}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: b}]}`,
		},
		{
			name:    "row28-b1-test-failure-errors",
			patch:   "- {op: test, path: /metadata/labels/app, value: db}",
			wantErr: "test failed",
		},
		{
			name:    "row28-b1-copy-to-missing-parent-errors",
			patch:   "- {op: copy, from: /metadata/labels, path: /spec/missing/labels}",
			wantErr: "copy",
		},
		{
			name: "row28-b1-remove-then-add-runs-in-order",
			patch: `
- {op: remove, path: /metadata/labels}
- {op: add, path: /metadata/labels/fresh, value: "1"}`,
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {fresh: "1"}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: b}]}`,
		},
		{
			name:  "row28-b1-json-array-form",
			patch: `[{"op": "replace", "path": "/spec/containers/0/image", "value": "q"}]`,
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: web}}
spec: {containers: [{name: c1, image: q}, {name: c2, image: b}]}`,
		},
		{
			name:  "row30-b1-unquoted-map-value-in-flow-yaml",
			patch: `- {op: add, path: /metadata/annotations, value: {"app":"web"}}`,
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: web}, annotations: {app: web}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: b}]}`,
		},
		{
			name:    "row30-b1-quoted-map-value-breaks-yaml",
			patch:   `- {op: add, path: /metadata/annotations, value: "{"app":"web"}"}`,
			wantErr: "failed to convert patchesJSON6902 to JSON",
		},
		{
			name:  "move-op",
			patch: "- {op: move, from: /metadata/labels/app, path: /metadata/labels/role}",
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {role: web}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: b}]}`,
		},
		{
			name:  "integers-stay-integers",
			patch: "- {op: add, path: /spec/terminationGracePeriodSeconds, value: 30}",
			want: `
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: web}}
spec: {containers: [{name: c1, image: a}, {name: c2, image: b}], terminationGracePeriodSeconds: 30}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := mustYAML(t, json6902Pod)
			got, err := JSON6902(in, tt.patch)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !Equal(in, mustYAML(t, json6902Pod)) {
				t.Errorf("JSON6902 modified its input")
			}
			want := in
			if tt.want != "" {
				want = mustYAML(t, tt.want)
			}
			if !Equal(got, want) {
				t.Errorf("got %s\nwant %s", toYAML(got), toYAML(want))
			}
		})
	}
}

func TestJSON6902IntegersDecodeAsInt64(t *testing.T) {
	got, err := JSON6902(mustYAML(t, json6902Pod), "- {op: add, path: /spec/priority, value: 7}")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got["spec"].(map[string]any)["priority"].(int64); !ok || v != 7 {
		t.Fatalf("priority = %#v, want int64(7)", got["spec"].(map[string]any)["priority"])
	}
}
