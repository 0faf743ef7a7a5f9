package cliapply

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// line is a verdict reduced to what the tests compare.
func line(v Verdict) string {
	return fmt.Sprintf("%s %s/%s %s %s", resourceName(v.Resource), v.Policy, v.Rule, v.Action, v.Result)
}

func TestRun(t *testing.T) {
	tests := []struct {
		name        string
		opts        Options
		want        []string
		wantBlocked bool
		wantWarning string
		wantNote    string
	}{
		{
			name: "a directory of resources, in file then document order",
			opts: Options{PolicyPaths: []string{"testdata/policies"}, ResourcePaths: []string{"testdata/resources"}},
			want: []string{
				"Pod/default/latest require-labels/check-app Audit pass",
				"Pod/default/latest no-latest/no-latest-tag Enforce fail",
				"Pod/default/good require-labels/check-app Audit pass",
				"Pod/default/good no-latest/no-latest-tag Enforce pass",
				"Pod/team-a/unlabelled require-labels/check-app Audit fail",
				"Pod/team-a/unlabelled no-latest/no-latest-tag Enforce pass",
			},
			wantBlocked: true,
			wantNote:    "testdata/policies: skipped 1 file(s) without policies",
		},
		{
			name: "a file named on the command line that holds no policy is warned about",
			opts: Options{PolicyPaths: []string{"testdata/policies/policies.yaml", "testdata/policies/kustomization.yaml"}, ResourcePaths: []string{"testdata/resources/latest.yaml"}},
			want: []string{
				"Pod/default/latest require-labels/check-app Audit pass",
				"Pod/default/latest no-latest/no-latest-tag Enforce fail",
			},
			wantBlocked: true,
			wantWarning: "kustomization.yaml: Kustomization is not a policy, skipped",
		},
		{
			name: "without values, user or exception: the variable is unresolved, no admin, prod Pod fails",
			opts: Options{PolicyPaths: []string{"testdata/flags/policies.yaml"}, ResourcePaths: []string{"testdata/flags/pod.yaml"}},
			want: []string{"Pod/shop/web flags/team-from-values Enforce error"},
		},
		{
			name: "--values-file pins the variable and the namespace's labels",
			opts: Options{PolicyPaths: []string{"testdata/flags/policies.yaml"}, ResourcePaths: []string{"testdata/flags/pod.yaml"}, ValuesFile: "testdata/flags/values.yaml"},
			want: []string{
				"Pod/shop/web flags/team-from-values Enforce fail",
				"Pod/shop/web flags/prod-namespaces Enforce fail",
			},
			wantBlocked: true,
		},
		{
			name: "--set wins over the values file; --userinfo is the requesting user; --exception applies",
			opts: Options{
				PolicyPaths: []string{"testdata/flags/policies.yaml"}, ResourcePaths: []string{"testdata/flags/pod.yaml"},
				ValuesFile: "testdata/flags/values.yaml", Set: []string{"team=payments"},
				UserInfoFile: "testdata/flags/userinfo.yaml", ExceptionPaths: []string{"testdata/flags/exception.yaml"},
			},
			want: []string{
				"Pod/shop/web flags/team-from-values Enforce pass",
				"Pod/shop/web flags/admins-only Enforce fail",
				"Pod/shop/web flags/prod-namespaces Enforce skip",
			},
			wantBlocked: true,
		},
		{
			name: "an Audit failure does not block; --audit-warn makes it a warning",
			opts: Options{PolicyPaths: []string{"testdata/policies/policies.yaml"}, ResourcePaths: []string{"testdata/resources/pods.yaml"}, AuditWarn: true},
			want: []string{
				"Pod/default/good require-labels/check-app Audit pass",
				"Pod/default/good no-latest/no-latest-tag Enforce pass",
				"Pod/team-a/unlabelled require-labels/check-app Audit warn",
				"Pod/team-a/unlabelled no-latest/no-latest-tag Enforce pass",
			},
		},
		{
			name: "resources from stdin",
			opts: Options{
				PolicyPaths: []string{"testdata/policies/policies.yaml"}, ResourcePaths: []string{"-"},
				Stdin: strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: ns1}\nspec:\n  containers: [{name: c, image: a:latest}]\n"),
			},
			want: []string{
				"Pod/ns1/x require-labels/check-app Audit fail",
				"Pod/ns1/x no-latest/no-latest-tag Enforce fail",
			},
			wantBlocked: true,
		},
		{
			name: "a namespaced Policy judges only its own namespace's resources",
			opts: Options{PolicyPaths: []string{"testdata/tenancy/policies.yaml"}, ResourcePaths: []string{"testdata/resources"}},
			want: []string{
				"Pod/default/latest default/default-rules/no-pods Audit fail",
				"Pod/default/good default/default-rules/no-pods Audit fail",
				"Pod/team-a/unlabelled team-a/team-rules/no-pods Enforce fail",
			},
			wantBlocked: true,
		},
		{
			name: "a feature the CLI does not run is named in a warning",
			opts: Options{PolicyPaths: []string{"testdata/unsupported/manifests.yaml"}, ResourcePaths: []string{"testdata/resources/pods.yaml"}},
			want: []string{
				"Pod/default/good signed-manifests/signed Audit error",
				"Pod/default/good signed-manifests/named Audit pass",
				"Pod/team-a/unlabelled signed-manifests/signed Audit error",
				"Pod/team-a/unlabelled signed-manifests/named Audit pass",
			},
			wantWarning: `ClusterPolicy "signed-manifests": spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet`,
		},
		{
			name: "a ClusterPolicy and a ValidatingPolicy of one name both judge, under the one name",
			opts: Options{PolicyPaths: []string{"testdata/samename/cluster-policy.yaml", "testdata/samename/validating-policy.yaml"}, ResourcePaths: []string{"testdata/samename/pods.yaml"}},
			want: []string{
				"Pod/default/latest-labelled disallow-latest/no-latest-tag Enforce fail",
				"Pod/default/latest-labelled disallow-latest/ Enforce pass",
				"Pod/default/pinned-unlabelled disallow-latest/no-latest-tag Enforce pass",
				"Pod/default/pinned-unlabelled disallow-latest/ Enforce fail",
			},
			wantBlocked: true,
		},
		{
			name: "--exception applies a policies.kyverno.io PolicyException",
			opts: Options{PolicyPaths: []string{"testdata/samename/validating-policy.yaml"}, ResourcePaths: []string{"testdata/samename/pods.yaml"},
				ExceptionPaths: []string{"testdata/celexception/exception.yaml"}},
			want: []string{
				"Pod/default/latest-labelled disallow-latest/ Enforce pass",
				"Pod/default/pinned-unlabelled disallow-latest/exception Enforce skip",
			},
		},
		{
			name: "a policies.kyverno.io PolicyException among the policies applies",
			opts: Options{PolicyPaths: []string{"testdata/samename/validating-policy.yaml", "testdata/celexception"}, ResourcePaths: []string{"testdata/samename/pods.yaml"}},
			want: []string{
				"Pod/default/latest-labelled disallow-latest/ Enforce pass",
				"Pod/default/pinned-unlabelled disallow-latest/exception Enforce skip",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Run(context.Background(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range out.Verdicts {
				got = append(got, line(v))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("verdicts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if out.Blocked != tt.wantBlocked {
				t.Errorf("blocked = %v, want %v", out.Blocked, tt.wantBlocked)
			}
			if tt.wantWarning != "" && !strings.Contains(strings.Join(out.Warnings, "\n"), tt.wantWarning) {
				t.Errorf("warnings %v, want one about %s", out.Warnings, tt.wantWarning)
			}
			if tt.wantWarning == "" && len(out.Warnings) > 0 {
				t.Errorf("warnings %v, want none", out.Warnings)
			}
			if tt.wantNote != "" && !strings.Contains(strings.Join(out.Notes, "\n"), tt.wantNote) {
				t.Errorf("notes %v, want %q", out.Notes, tt.wantNote)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no resources", Options{PolicyPaths: []string{"testdata/policies"}}, "no resources"},
		{"no policies", Options{PolicyPaths: []string{"testdata/resources"}, ResourcePaths: []string{"testdata/resources"}}, "no ClusterPolicy or Policy"},
		{"missing file", Options{PolicyPaths: []string{"testdata/nope.yaml"}, ResourcePaths: []string{"-"}}, "nope.yaml"},
		{"bad resource document", Options{PolicyPaths: []string{"testdata/policies"}, ResourcePaths: []string{"-"},
			Stdin: strings.NewReader("apiVersion: v1\nkind: Pod\n---\nkind: [\n")}, "- (document 2)"},
		{"bad --set", Options{PolicyPaths: []string{"testdata/flags/policies.yaml"}, ResourcePaths: []string{"testdata/flags/pod.yaml"}, Set: []string{"team"}}, `--set "team": want key=value`},
		{"--exception that is a policy", Options{PolicyPaths: []string{"testdata/flags/policies.yaml"}, ResourcePaths: []string{"testdata/flags/pod.yaml"}, ExceptionPaths: []string{"testdata/flags/policies.yaml"}}, "not PolicyExceptions"},
		{"--values-file of the wrong kind", Options{PolicyPaths: []string{"testdata/flags/policies.yaml"}, ResourcePaths: []string{"testdata/flags/pod.yaml"}, ValuesFile: "testdata/flags/userinfo.yaml"}, `--values-file: testdata/flags/userinfo.yaml: kind: got "UserInfo", want Values`},
		{"the same policy in two files", Options{PolicyPaths: []string{"testdata/samename/cluster-policy.yaml", "testdata/samename/again.yaml"}, ResourcePaths: []string{"testdata/samename/pods.yaml"}},
			"ClusterPolicy disallow-latest is declared twice: in testdata/samename/cluster-policy.yaml and in testdata/samename/again.yaml"},
		{"resource without kind", Options{PolicyPaths: []string{"testdata/policies"}, ResourcePaths: []string{"-"},
			Stdin: strings.NewReader("metadata: {name: x}\n")}, "missing apiVersion or kind"},
		{"a policy with an unknown field", Options{PolicyPaths: []string{"testdata/invalid/unknown-field.yaml"}, ResourcePaths: []string{"testdata/resources/pods.yaml"}},
			`testdata/invalid/unknown-field.yaml (document 2): ClusterPolicy require-labels: unknown field "spec.rules[0].validat"`},
		{"an invalid policy in a folder", Options{PolicyPaths: []string{"testdata/invalid/folder"}, ResourcePaths: []string{"testdata/resources/pods.yaml"}},
			`testdata/invalid/folder/bad-anchor.yaml: ClusterPolicy "require-team": spec.rules[0].validate.pattern.metadata.labels`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	out, err := Run(context.Background(), Options{PolicyPaths: []string{"testdata/policies/policies.yaml"}, ResourcePaths: []string{"testdata/resources/pods.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	var all, failOnly bytes.Buffer
	if err := WriteTable(&all, out, false, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&failOnly, out, false, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RESOURCE", "Pod/team-a/unlabelled", "label app is required", "pass: 3, fail: 1, warn: 0, error: 0, skip: 0\n"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, all.String())
		}
	}
	if strings.Contains(failOnly.String(), "Pod/default/good") || !strings.Contains(failOnly.String(), "Pod/team-a/unlabelled") {
		t.Errorf("--fail-only table:\n%s", failOnly.String())
	}
}

func TestPolicyReports(t *testing.T) {
	out, err := Run(context.Background(), Options{PolicyPaths: []string{"testdata/policies"}, ResourcePaths: []string{"testdata/resources"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	reports := PolicyReports(out, now)
	if len(reports) != 3 {
		t.Fatalf("got %d reports, want one per resource (3)", len(reports))
	}
	r, ok := reports[2].(*policyreportv1alpha2.PolicyReport)
	if !ok {
		t.Fatalf("report 3 is %T", reports[2])
	}
	if r.Namespace != "team-a" || r.Scope.Name != "unlabelled" || r.Scope.Kind != "Pod" {
		t.Errorf("report: namespace %q, scope %+v", r.Namespace, r.Scope)
	}
	if r.Summary != (policyreportv1alpha2.PolicyReportSummary{Pass: 1, Fail: 1}) {
		t.Errorf("summary %+v", r.Summary)
	}
	res := r.Results[0]
	if res.Policy != "require-labels" || res.Result != "fail" || res.Category != "Best Practices" ||
		res.Severity != "medium" || !res.Scored || res.Source != "kyverno" || res.Timestamp.Seconds != now.Unix() {
		t.Errorf("result %+v", res)
	}

	var buf bytes.Buffer
	if err := WriteReports(&buf, "", reports); err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(buf.String(), "---\n")
	if len(docs) != 3 {
		t.Fatalf("got %d YAML documents", len(docs))
	}
	var back policyreportv1alpha2.PolicyReport
	if err := yaml.UnmarshalStrict([]byte(docs[2]), &back); err != nil {
		t.Fatalf("the YAML does not read back as a PolicyReport: %v\n%s", err, docs[2])
	}
	if back.Kind != "PolicyReport" || back.APIVersion != "wgpolicyk8s.io/v1alpha2" || len(back.Results) != 2 {
		t.Errorf("read back %+v", back)
	}
}

// BenchmarkApply evaluates 2000 Pods, half of them failing, against the two
// test policies.
func BenchmarkApply(b *testing.B) {
	var src strings.Builder
	for i := range 2000 {
		image := "nginx:1.27"
		if i%2 == 1 {
			image = "nginx:latest"
		}
		fmt.Fprintf(&src, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p%d, labels: {app: a}}\nspec:\n  containers: [{name: c, image: %q}]\n", i, image)
	}
	dir := b.TempDir()
	if err := os.WriteFile(dir+"/pods.yaml", []byte(src.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Run(context.Background(), Options{PolicyPaths: []string{"testdata/policies"}, ResourcePaths: []string{dir}}); err != nil {
			b.Fatal(err)
		}
	}
}
