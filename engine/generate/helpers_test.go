package generate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/jsoncontext"
)

var testJP = jmespath.New()

// triggerDocument builds the rule document the engine would hand Generate
// for a CREATE of trigger, with the rule's (variable) context entries
// loaded.
func triggerDocument(t *testing.T, trigger map[string]any, rule *kyvernov1.Rule) *jsoncontext.Document {
	t.Helper()
	ref := RefOf(trigger)
	doc := jsoncontext.New(testJP, jsoncontext.RequestDocument(jsoncontext.RequestInfo{
		Operation: "CREATE",
		Object:    trigger,
		Namespace: ref.Namespace,
		Name:      ref.Name,
	}))
	if rule != nil && len(rule.Context) > 0 {
		doc = doc.Child()
		if _, err := (BasicElements{}).Enter(context.Background(), doc, 0, &kyvernov1.ForEachGeneration{Context: rule.Context}); err != nil {
			t.Fatalf("rule context: %v", err)
		}
	}
	return doc
}

// jsonValue turns any Go value into plain JSON values, so objects from
// YAML files and from the package compare with reflect.DeepEqual.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// readObjects reads every YAML document of a file as an object.
func readObjects(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, doc := range strings.Split("\n"+string(data), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
	return out
}

func diffJSON(t *testing.T, got, want any) string {
	t.Helper()
	g, w := jsonValue(t, got), jsonValue(t, want)
	if reflect.DeepEqual(g, w) {
		return ""
	}
	gb, _ := json.MarshalIndent(g, "", "  ")
	wb, _ := json.MarshalIndent(w, "", "  ")
	return "got:\n" + string(gb) + "\nwant:\n" + string(wb)
}

func testdataFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test cases in testdata/%s: %v", dir, err)
	}
	return files
}

func mustJSON(t *testing.T, v any) *apiextv1.JSON {
	t.Helper()
	j, err := kyvernov1.ToJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func yamlUnmarshal(data []byte, out any) error { return yaml.Unmarshal(data, out) }
