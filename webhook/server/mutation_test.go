package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/charter-dev/charter/clusterstate/policycache"
)

func TestEngineMutator(t *testing.T) {
	snapshot, err := policycache.Build(loadPolicies(t, "testdata/mutate-policies.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(snapshot.Errors) > 0 {
		t.Fatalf("test policies do not compile: %v", snapshot.Errors)
	}
	h := NewHandler(Options{Policies: staticSnapshots{snapshot}, Mutator: EngineMutator{}})
	inNamespace := func(ns string) pod { p := compliant(); p.namespace = ns; return p }
	managedBy := `{"op":"add","path":"/metadata/labels/app.kubernetes.io~1managed-by","value":"charter"}`

	tests := []struct {
		name         string
		path         string
		pod          pod
		wantAllowed  bool
		wantOps      []string
		wantMessage  string
		wantWarnings []string
	}{
		{
			name: "a mutate rule adds a label", path: PathMutateFail, pod: compliant(),
			wantAllowed: true, wantOps: []string{managedBy},
		},
		{
			name: "rules chain and emitWarning policies warn on every applied rule", path: PathMutateFail, pod: inNamespace("team-a"),
			wantAllowed: true,
			// One diff of the final object, in path order (mutate.Diff).
			wantOps: []string{
				`{"op":"add","path":"/metadata/annotations","value":{"owner":"alice"}}`,
				managedBy,
			},
			wantWarnings: []string{"policy copy-owner.owner-annotation: mutated Pod/nginx in namespace team-a"},
		},
		{
			name: "the ignore path sees only Ignore policies", path: PathMutateIgnore, pod: compliant(),
			wantAllowed: true,
		},
		{
			name: "DELETE is admitted untouched", path: PathMutateFail,
			pod:         func() pod { p := compliant(); p.operation = "DELETE"; return p }(),
			wantAllowed: true,
		},
		{
			name: "an erroring rule under failurePolicy Fail denies in Kyverno's words", path: PathMutateFail, pod: inNamespace("broken"),
			wantMessage: "mutation policy broken-fail error: failed to apply policy broken-fail rules [unresolved: ",
		},
		{
			name: "an erroring rule under failurePolicy Ignore admits with a warning", path: PathMutateIgnore, pod: inNamespace("broken-ignore"),
			wantAllowed:  true,
			wantWarnings: []string{"policy broken-ignore.unresolved: "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := decision(t, h, tt.path, tt.pod.review())
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("Allowed = %v, want %v (%+v)", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			if !tt.wantAllowed {
				if !strings.HasPrefix(resp.Result.Message, tt.wantMessage) {
					t.Errorf("message = %q, want prefix %q", resp.Result.Message, tt.wantMessage)
				}
				if resp.Patch != nil {
					t.Errorf("a denial carries a patch: %s", resp.Patch)
				}
				return
			}
			var ops []json.RawMessage
			if len(resp.Patch) > 0 {
				if err := json.Unmarshal(resp.Patch, &ops); err != nil {
					t.Fatalf("patch %s: %v", resp.Patch, err)
				}
			}
			var got []string
			for _, op := range ops {
				got = append(got, string(op))
			}
			if !reflect.DeepEqual(got, tt.wantOps) {
				t.Errorf("patch ops =\n  %v\nwant\n  %v", got, tt.wantOps)
			}
			if (resp.PatchType != nil) != (len(tt.wantOps) > 0) || (resp.PatchType != nil && *resp.PatchType != "JSONPatch") {
				t.Errorf("patchType = %v", resp.PatchType)
			}
			if len(resp.Warnings) != len(tt.wantWarnings) {
				t.Fatalf("warnings = %q, want %q", resp.Warnings, tt.wantWarnings)
			}
			for i, w := range tt.wantWarnings {
				if !strings.HasPrefix(resp.Warnings[i], w) {
					t.Errorf("warning %d = %q, want prefix %q", i, resp.Warnings[i], w)
				}
			}
		})
	}
}
