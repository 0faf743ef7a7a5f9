package pattern

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

type fileCase struct {
	Name     string `json:"name"`
	Full     bool   `json:"full"`
	Pattern  any    `json:"pattern"`
	Resource any    `json:"resource"`
	Want     string `json:"want"`
	Path     string `json:"path"`
	Msg      string `json:"msg"`
}

func loadCases(t *testing.T, file string) []fileCase {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cases []fileCase
	if err := yaml.Unmarshal(data, &cases); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return cases
}

func kindOf(e *Error) string {
	if e == nil {
		return "pass"
	}
	return e.Kind.String()
}

// TestEdgeCases runs the verified edge-case table of validate-semantics.md §10
// and further cases of §1–§4 kept in testdata.
func TestEdgeCases(t *testing.T) {
	for _, tc := range loadCases(t, "testdata/edge-cases.yaml") {
		t.Run(tc.Name, func(t *testing.T) {
			pattern, resource := tc.Pattern, tc.Resource
			if !tc.Full {
				pattern = map[string]any{"spec": pattern}
				resource = map[string]any{"spec": resource}
			}
			got := Validate(resource, pattern)
			checkVerdict(t, resource, pattern, got)
			if kindOf(got) != tc.Want {
				t.Fatalf("got %s (%+v), want %s", kindOf(got), got, tc.Want)
			}
			if got == nil {
				return
			}
			if tc.Path != "" && got.Path != tc.Path {
				t.Errorf("path = %q, want %q", got.Path, tc.Path)
			}
			if tc.Msg != "" && got.Msg != tc.Msg {
				t.Errorf("msg = %q, want %q", got.Msg, tc.Msg)
			}
			if got.Kind == Invalid && got.Path != "" {
				t.Errorf("an Invalid result has path %q", got.Path)
			}
		})
	}
}

// checkVerdict checks that Compiled.Verdict decides as Validate did (want):
// the same kind and path, the same message for a skip or an error, and
// none made for a fail.
func checkVerdict(t *testing.T, resource, pattern any, want *Error) {
	t.Helper()
	c, _ := compile(pattern)
	got := c.Verdict(resource)
	if kindOf(got) != kindOf(want) {
		t.Fatalf("Verdict %s %+v, Validate %s %+v", kindOf(got), got, kindOf(want), want)
	}
	if got == nil {
		return
	}
	wantMsg := want.Msg
	if want.Kind == Fail {
		wantMsg = ""
	}
	if got.Path != want.Path || got.Msg != wantMsg {
		t.Errorf("Verdict path %q msg %q, want path %q msg %q", got.Path, got.Msg, want.Path, wantMsg)
	}
}
