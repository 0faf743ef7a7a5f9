package cliapply

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRunMutatesBeforeValidatingAndGenerates uses the repository's own
// mutate and generate policies: the mutated Pod is validated, printed, and
// a new Namespace yields its default-deny NetworkPolicy.
func TestRunMutatesBeforeValidatingAndGenerates(t *testing.T) {
	const resources = `
apiVersion: v1
kind: Namespace
metadata: {name: payments}
---
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: payments}
spec:
  containers: [{name: app, image: nginx:1.27}]
`
	out, err := Run(context.Background(), Options{
		PolicyPaths: []string{
			"../../policies/mutate/add-default-securitycontext/add-default-securitycontext.yaml",
			"../../policies/generate/default-deny-networkpolicy/default-deny-networkpolicy.yaml",
			"testdata/policies/policies.yaml",
		},
		ResourcePaths: []string{"-"},
		Stdin:         strings.NewReader(resources),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range out.Verdicts {
		got = append(got, line(v))
	}
	want := []string{
		"Namespace/payments default-deny-networkpolicy/default-deny  pass",
		"Pod/payments/app add-default-securitycontext/add-default-securitycontext  pass",
		"Pod/payments/app require-labels/check-app Audit fail",
		"Pod/payments/app no-latest/no-latest-tag Enforce pass",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("verdicts:\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	if len(out.Mutated) != 1 || len(out.Generated) != 1 {
		t.Fatalf("mutated %d, generated %d; want 1 and 1", len(out.Mutated), len(out.Generated))
	}
	var buf bytes.Buffer
	if err := WriteResources(&buf, out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"# mutated v1/Pod payments/app", "runAsNonRoot: true", "# generated networking.k8s.io/v1/NetworkPolicy payments/default-deny", "podSelector: {}"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("printed resources lack %q:\n%s", s, buf.String())
		}
	}
}
