package corpus

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadCannotRun: the page's section gives the table's features and the
// refusal list's texts, and Lists accepts a refusal only for them: a
// feature when charter said it is not supported, a list text anywhere in
// the refusal.
func TestReadCannotRun(t *testing.T) {
	got, err := ReadCannotRun(filepath.Join("testdata", "policies.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"validate.assert", "authorizer"}; !slices.Equal(got.Features, want) {
		t.Errorf("features %q, want %q", got.Features, want)
	}
	if want := []string{"spec.auditAnnotations: field not declared in schema", "requires an attestor"}; !slices.Equal(got.Refusals, want) {
		t.Errorf("refusals %q, want %q", got.Refusals, want)
	}
	for _, c := range []struct{ refusal, want string }{
		{`ClusterPolicy "x": spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet`, "validate.assert"},
		{`validate.assert appears, but charter refused it for another reason`, ""},
		{`GeneratingPolicy.policies.kyverno.io "a" is invalid: .spec.auditAnnotations: field not declared in schema`, "spec.auditAnnotations: field not declared in schema"},
		{`ImageValidatingPolicy "b": spec: requires an attestor`, "requires an attestor"},
		{`something else: not a refusal`, ""},
		{`neither`, ""},
	} {
		if got := got.Lists(c.refusal); got != c.want {
			t.Errorf("Lists(%q) = %q, want %q", c.refusal, got, c.want)
		}
	}
}

// TestReadCannotRunFailsClosed: a page without the section, or a
// refusal line without its text in a code span, is an error.
func TestReadCannotRunFailsClosed(t *testing.T) {
	for name, text := range map[string]string{
		"no section":   "# x\n\n## Other\n",
		"no code span": "## What charter cannot run yet\n\n| feature |\n|---|\n| `a` |\n\nRefused today, one reason a line:\n\n- plain words\n",
	} {
		path := filepath.Join(t.TempDir(), "policies.md")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadCannotRun(path); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestOnlyKindsNotServed: a refusal counts as Kyverno's own on this
// cluster only when every fault is a kind the cluster does not serve.
func TestOnlyKindsNotServed(t *testing.T) {
	notServed := `ClusterPolicy "vpa": spec.rules[0].match.any[0].resources.kinds[0]: unable to convert GVK to GVR for kinds VerticalPodAutoscaler: ` + kindNotServed
	tests := []struct {
		name, refusal string
		want          bool
	}{
		{"one kind not served", `admission webhook "validate-policy.charter.svc" denied the request: ` + notServed, true},
		{"two kinds not served", notServed + "\n" + notServed, true},
		{"another fault too", notServed + "\n" + `ClusterPolicy "vpa": spec.rules[1].validate: one of pattern, anyPattern, deny, foreach, cel must be specified`, false},
		{"another fault only", `admission webhook "validate-policy.charter.svc" denied the request: ClusterPolicy "x": spec.admission: disabling both admission and background processing is not allowed`, false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OnlyKindsNotServed(tt.refusal); got != tt.want {
				t.Errorf("OnlyKindsNotServed(%q) = %v, want %v", tt.refusal, got, tt.want)
			}
		})
	}
}
