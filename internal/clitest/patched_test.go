package clitest

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// TestSameResource follows the table of spec §9.2 (Kyverno v1.19, P:h1):
// how `kyverno test` compares an actual patched resource with the
// expected one.
func TestSameResource(t *testing.T) {
	const actual = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
  labels: {app: web, n: "1"}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - {name: b, image: nginx}
  - {name: a, image: nginx}
`
	cases := []struct {
		name     string
		expected string
		same     bool
	}{
		{"exact", actual, true},
		{"empty and null fields are ignored", `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
  annotations: {}
  creationTimestamp: null
  labels: {app: web, n: "1"}
spec:
  terminationGracePeriodSeconds: 30
  volumes: []
  containers:
  - {name: b, image: nginx, env: [], resources: {}}
  - {name: a, image: nginx}
status: {}
`, true},
		{"list order counts", `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, labels: {app: web, n: "1"}}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - {name: a, image: nginx}
  - {name: b, image: nginx}
`, false},
		{"types count", `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, labels: {app: web, n: 1}}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - {name: b, image: nginx}
  - {name: a, image: nginx}
`, false},
		{"generate labels and the default managed-by are ignored", `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
  labels: {app: web, n: "1", app.kubernetes.io/managed-by: kyverno, generate.kyverno.io/whatever: x}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - {name: b, image: nginx}
  - {name: a, image: nginx}
`, true},
		{"an empty string is a value", `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, labels: {app: web, n: "1"}}
spec:
  hostname: ""
  terminationGracePeriodSeconds: 30
  containers:
  - {name: b, image: nginx}
  - {name: a, image: nginx}
`, false},
		{"1 equals 1.0", `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, labels: {app: web, n: "1"}}
spec:
  terminationGracePeriodSeconds: 30.0
  containers:
  - {name: b, image: nginx}
  - {name: a, image: nginx}
`, true},
		{"another managed-by differs", `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, labels: {app: web, n: "1", app.kubernetes.io/managed-by: helm}}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - {name: b, image: nginx}
  - {name: a, image: nginx}
`, false},
	}
	var a map[string]any
	if err := yaml.Unmarshal([]byte(actual), &a); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var e map[string]any
			if err := yaml.Unmarshal([]byte(tc.expected), &e); err != nil {
				t.Fatal(err)
			}
			if got := SameResource(a, e); got != tc.same {
				t.Errorf("SameResource = %v, want %v (diff: %s)", got, tc.same, diffSummary(a, e))
			}
		})
	}
}
