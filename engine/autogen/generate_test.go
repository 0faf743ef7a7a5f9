package autogen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// jsonCase is a testdata file: a policy in, the controllers and generated
// rules expected out.
type jsonCase struct {
	Policy struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Rules []map[string]any `json:"rules"`
		} `json:"spec"`
	} `json:"policy"`
	Want struct {
		Controllers []string         `json:"controllers"`
		Rules       []map[string]any `json:"rules"`
	} `json:"want"`
}

func loadJSONCase(t *testing.T, path string) jsonCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var c jsonCase
	if err := decode(j, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// normalize makes two decoded JSON values comparable (json.Number versus
// float64, nil versus empty).
func normalize(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPlanForTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c := loadJSONCase(t, file)
			before := normalize(t, c.Policy.Spec.Rules)
			got, err := planFor(c.Policy.Spec.Rules, c.Policy.Metadata.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(normalize(t, c.Want.Rules), normalize(t, got.generated), cmp.Comparer(func(a, b []any) bool {
				return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b)
			})); diff != "" && !(len(c.Want.Rules) == 0 && len(got.generated) == 0) {
				t.Errorf("generated rules (-want +got):\n%s", diff)
			}
			if len(c.Want.Controllers) != 0 || len(got.controllers) != 0 {
				if diff := cmp.Diff(c.Want.Controllers, got.controllers); diff != "" {
					t.Errorf("controllers (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(before, normalize(t, c.Policy.Spec.Rules)); diff != "" {
				t.Errorf("the input rules were modified (-before +after):\n%s", diff)
			}
		})
	}
}
