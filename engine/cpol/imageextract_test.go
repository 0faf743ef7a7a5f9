package cpol

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jmespath"
)

// TestImageExtractors runs the root's testdata/imageextractors (the
// engine's TestImageExtractorsTestdata runs the phases over it): custom
// extractors over lists and maps, their defaults, jmesPath, replacing the
// standard extractors and the empty-list error, as where a rule finds
// images and the images entry it makes of them.
func TestImageExtractors(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "imageextractors", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no testdata in ../testdata/imageextractors")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			// Only what the extraction decides; the phases' fields are
			// the root test's.
			var tc struct {
				Policy json.RawMessage `json:"policy"`
				Cases  []struct {
					Name     string         `json:"name"`
					Resource map[string]any `json:"resource"`
					Pointers []string       `json:"pointers"`
					Images   map[string]any `json:"images"`
					Error    string         `json:"error"`
				} `json:"cases"`
			}
			if err := yaml.Unmarshal(data, &tc); err != nil {
				t.Fatal(err)
			}
			src := &kyvernov1.ClusterPolicy{}
			if err := json.Unmarshal(tc.Policy, src); err != nil {
				t.Fatal(err)
			}
			p, errs := Compile(src, src.GetName(), jmespath.New(), nil)
			if len(errs) > 0 {
				t.Fatalf("compile: %v", errs)
			}
			r := p.rules[0]
			if r.verify == nil || len(r.verify.extractors) == 0 {
				t.Fatalf("rule %s has no compiled extractors", r.name)
			}
			for _, c := range tc.Cases {
				t.Run(c.Name, func(t *testing.T) {
					found, err := r.verify.images(c.Resource)
					switch {
					case c.Error != "":
						if err == nil || err.Error() != c.Error {
							t.Errorf("extraction error %v, want %q", err, c.Error)
						}
					case err != nil:
						t.Errorf("extraction: %v", err)
					default:
						var pointers []string
						for _, img := range found.list {
							pointers = append(pointers, img.Pointer)
						}
						if !slices.Equal(pointers, c.Pointers) {
							t.Errorf("pointers %q, want %q", pointers, c.Pointers)
						}
						if c.Images != nil && !reflect.DeepEqual(found.context, c.Images) {
							got, _ := json.Marshal(found.context)
							want, _ := json.Marshal(c.Images)
							t.Errorf("images\n got %s\nwant %s", got, want)
						}
					}
				})
			}
		})
	}
}
