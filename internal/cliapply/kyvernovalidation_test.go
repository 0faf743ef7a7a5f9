package cliapply

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/validationcases"
)

// TestKyvernoPolicyValidation: `charter apply` refuses every policy of
// engine/testdata/validation that Kyverno refuses, naming the field
// (except those only the cluster can judge, marked cluster), and
// warns, as admission does, about every policy Kyverno warns about.
func TestKyvernoPolicyValidation(t *testing.T) {
	for _, tc := range validationcases.Load(t) {
		t.Run(tc.Name, func(t *testing.T) {
			policy, err := yaml.Marshal(tc.Policy)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			policyFile := filepath.Join(dir, "policy.yaml")
			if err := os.WriteFile(policyFile, policy, 0o600); err != nil {
				t.Fatal(err)
			}
			opts := Options{PolicyPaths: []string{policyFile}, ResourcePaths: []string{"-"},
				Stdin: strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: team}\n")}
			kind := tc.Kind()
			if kind == "PolicyException" || kind == "GlobalContextEntry" {
				// An exception is given with --exception, beside a policy
				// to run; a GlobalContextEntry among the policies.
				passing := filepath.Join(dir, "passing.yaml")
				if err := os.WriteFile(passing, []byte(passingPolicy), 0o600); err != nil {
					t.Fatal(err)
				}
				opts.PolicyPaths = []string{passing}
				if kind == "PolicyException" {
					opts.ExceptionPaths = []string{policyFile}
				} else {
					opts.PolicyPaths = append(opts.PolicyPaths, policyFile)
				}
			}
			out, err := Run(context.Background(), opts)
			if kind == "GlobalContextEntry" {
				// The CLI reads no GlobalContextEntry, as Kyverno's CLI
				// takes none (a values file gives what a rule reads of
				// one): it says it skipped it and runs the policies.
				if err != nil || !slices.ContainsFunc(out.Warnings, func(w string) bool {
					return strings.Contains(w, "GlobalContextEntry") && strings.Contains(w, "skipped")
				}) {
					t.Fatalf("got %v, warnings %q; want the entry skipped, named", err, out.Warnings)
				}
				return
			}
			if strings.HasSuffix(kind, "CleanupPolicy") || strings.HasSuffix(kind, "DeletingPolicy") {
				// The CLI does not run cleanup policies (docs/policies.md,
				// What charter cannot run yet): it refuses to run one.
				if err == nil {
					t.Fatal("charter apply ran a cleanup policy")
				}
				return
			}
			if tc.Discovery {
				// The CLI asks no cluster which kinds it serves, as
				// Kyverno's CLI does not.
				if err != nil {
					t.Fatalf("the CLI runs a policy only discovery refuses: %v", err)
				}
				return
			}
			if tc.Cluster {
				// Only the cluster refuses it (cpol.ClusterFaults): a
				// values file or --set may define the variable.
				if err != nil {
					t.Fatalf("the CLI runs a policy only the cluster refuses: %v", err)
				}
				return
			}
			if tc.Warning != "" {
				if err != nil {
					t.Fatalf("a policy Kyverno only warns about must run: %v", err)
				}
				if !slices.ContainsFunc(out.Warnings, func(w string) bool { return strings.Contains(w, tc.Warning) }) {
					t.Fatalf("warnings %q lack %q", out.Warnings, tc.Warning)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), ": "+tc.Field+": ") {
				t.Fatalf("got %v, want a refusal naming %s", err, tc.Field)
			}
		})
	}
}

// TestNamespacedPolicyNeverSeesClusterScoped: the CLI, which asks no
// cluster and so runs a namespaced Policy naming a cluster-scoped kind
// (namespaced-cluster-kind, which admission and the GitOps check refuse),
// never applies it to a cluster-scoped object: the Namespace gets no
// verdict from it, a Pod of the policy's namespace does.
func TestNamespacedPolicyNeverSeesClusterScoped(t *testing.T) {
	var tc *validationcases.Case
	for _, c := range validationcases.Load(t) {
		if c.Name == "namespaced-cluster-kind" {
			tc = c
		}
	}
	if tc == nil {
		t.Fatal("no namespaced-cluster-kind case")
	}
	policy, err := yaml.Marshal(tc.Policy)
	if err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, policy, 0o600); err != nil {
		t.Fatal(err)
	}
	resources := "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\n" +
		"apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: team}\nspec: {containers: [{name: c, image: nginx}]}\n"
	out, err := Run(context.Background(), Options{PolicyPaths: []string{policyFile}, ResourcePaths: []string{"-"}, Stdin: strings.NewReader(resources)})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, v := range out.Verdicts {
		kinds = append(kinds, v.Resource.Kind+"="+v.Result)
	}
	if !slices.Equal(kinds, []string{"Pod=pass"}) {
		t.Fatalf("verdicts %v, want the Pod's only", kinds)
	}
}

// passingPolicy is a policy the CLI runs beside an exception or a
// GlobalContextEntry under test.
const passingPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: passing}
spec:
  background: false
  rules:
  - name: r
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`
