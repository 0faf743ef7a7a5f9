package mutate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// strategicCase is one file in testdata/strategic. Exactly one of want, skip and
// error is set: the patched resource, a condition that did not hold (global says
// which kind), or a substring of the error.
type strategicCase struct {
	Resource map[string]any `json:"resource"`
	Patch    map[string]any `json:"patch"`
	Want     map[string]any `json:"want"`
	Skip     bool           `json:"skip"`
	Global   bool           `json:"global"`
	Error    string         `json:"error"`
}

func TestStrategicMergeCases(t *testing.T) {
	files, err := filepath.Glob("testdata/strategic/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test cases: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var tc strategicCase
			if err := yaml.UnmarshalStrict(raw, &tc); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			before := deepCopy(tc.Resource)
			patchBefore := deepCopy(tc.Patch)
			got, err := StrategicMerge(tc.Resource, tc.Patch)
			if !Equal(tc.Resource, before) {
				t.Errorf("StrategicMerge modified its resource argument")
			}
			if !Equal(tc.Patch, patchBefore) {
				t.Errorf("StrategicMerge modified its patch argument")
			}
			switch {
			case tc.Error != "":
				if err == nil || !strings.Contains(err.Error(), tc.Error) {
					t.Fatalf("error = %v, want one containing %q", err, tc.Error)
				}
			case tc.Skip:
				if !errors.Is(err, ErrConditionNotMet) {
					t.Fatalf("error = %v, want ErrConditionNotMet", err)
				}
				if errors.Is(err, ErrGlobalConditionNotMet) != tc.Global {
					t.Errorf("errors.Is(err, ErrGlobalConditionNotMet) = %v, want %v", !tc.Global, tc.Global)
				}
				if !Equal(got, tc.Resource) {
					t.Errorf("a skipped patch must return the resource unchanged")
				}
			default:
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !Equal(got, tc.Want) {
					t.Errorf("result differs from want\n got: %s\nwant: %s", toYAML(got), toYAML(tc.Want))
				}
			}
		})
	}
}

func toYAML(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := yaml.Marshal(m)
	var out map[string]any
	_ = yaml.Unmarshal(b, &out)
	return out
}
