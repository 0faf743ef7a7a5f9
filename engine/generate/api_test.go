package generate

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jsoncontext"
)

func namespaceTrigger(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}
}

func dataRule(t *testing.T, gen kyvernov1.Generation) *kyvernov1.Rule {
	t.Helper()
	return &kyvernov1.Rule{Name: "r", Generation: &gen}
}

func TestGeneratesWhenSkipped(t *testing.T) {
	plain := dataRule(t, kyvernov1.Generation{GeneratePattern: kyvernov1.GeneratePattern{RawData: mustJSON(t, map[string]any{})}})
	each := dataRule(t, kyvernov1.Generation{ForEachGeneration: []kyvernov1.ForEachGeneration{{List: "x"}}})
	if GeneratesWhenSkipped(plain) {
		t.Error("plain pattern: kyverno test re-checks preconditions, want false")
	}
	if !GeneratesWhenSkipped(each) {
		t.Error("foreach: kyverno test generates anyway (row 50), want true")
	}
	if GeneratesWhenSkipped(&kyvernov1.Rule{}) {
		t.Error("rule without generate: want false")
	}
}

// The caller's Elements sees the element variables, and what it decides
// (skip, fail) is honoured per element.
func TestElementsCallback(t *testing.T) {
	rule := dataRule(t, kyvernov1.Generation{ForEachGeneration: []kyvernov1.ForEachGeneration{{
		List: "`[\"a\", \"b\", \"c\"]`",
		GeneratePattern: kyvernov1.GeneratePattern{
			ResourceSpec: kyvernov1.ResourceSpec{APIVersion: "v1", Kind: "ConfigMap", Name: "{{suffix}}", Namespace: "default"},
			RawData:      mustJSON(t, map[string]any{}),
		},
	}}})
	var seen []string
	elements := ElementsFunc(func(_ context.Context, doc *jsoncontext.Document, entryIndex int, entry *kyvernov1.ForEachGeneration) (bool, error) {
		el, _ := doc.Get("element")
		el0, _ := doc.Get("element0")
		idx, _ := doc.Get("elementIndex")
		idx0, _ := doc.Get("elementIndex0")
		if el != el0 || idx != float64(len(seen)) || idx0 != idx || entryIndex != 0 || entry != &rule.Generation.ForEachGeneration[0] {
			t.Errorf("entry %d: element=%v element0=%v elementIndex=%v elementIndex0=%v", entryIndex, el, el0, idx, idx0)
		}
		seen = append(seen, el.(string))
		switch el {
		case "b":
			return false, nil
		case "c":
			return false, errors.New("context entry \"x\": boom")
		}
		doc.Set("suffix", "from-callback")
		return true, nil
	})
	doc := triggerDocument(t, namespaceTrigger("ns"), nil)
	got, err := Generate(context.Background(), PolicyRef{Name: "p"}, rule, RefOf(namespaceTrigger("ns")), doc, Env{Elements: elements})
	if err == nil || !strings.Contains(err.Error(), `generate.foreach[0] element 2: context entry "x": boom`) {
		t.Fatalf("error = %v", err)
	}
	if len(got) != 1 || got[0].Ref().Name != "from-callback" {
		t.Fatalf("got %v", objectsOf(got))
	}
	if strings.Join(seen, ",") != "a,b,c" {
		t.Errorf("elements seen %v, want ascending a,b,c", seen)
	}
	if _, ok := doc.Get("suffix"); ok {
		t.Error("a variable set for an element leaked into the rule's document")
	}
}

// Generate never modifies the cluster objects it copies, nor the rule.
func TestGenerateDoesNotModifyInputs(t *testing.T) {
	src := map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "s", "namespace": "default", "uid": "u1", "resourceVersion": "1",
			"labels": map[string]any{"a": "b"}, "ownerReferences": []any{map[string]any{"name": "o"}}},
		"data": map[string]any{"k": "dg=="},
	}
	before := jsonValue(t, src)
	rule := dataRule(t, kyvernov1.Generation{GeneratePattern: kyvernov1.GeneratePattern{
		ResourceSpec: kyvernov1.ResourceSpec{APIVersion: "v1", Kind: "Secret", Name: "s", Namespace: "{{request.object.metadata.name}}"},
		Clone:        kyvernov1.CloneFrom{Namespace: "default", Name: "s"},
	}})
	ruleBefore := jsonValue(t, rule)
	for _, ns := range []string{"a", "b"} {
		trigger := namespaceTrigger(ns)
		got, err := Generate(context.Background(), PolicyRef{Name: "p"}, rule, RefOf(trigger), triggerDocument(t, trigger, nil), Env{Objects: NewObjects(src)})
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v %v", ns, got, err)
		}
		got[0].Object["data"].(map[string]any)["k"] = "changed"
	}
	if !reflect.DeepEqual(jsonValue(t, src), before) {
		t.Errorf("clone source modified: %v", src)
	}
	if !reflect.DeepEqual(jsonValue(t, rule), ruleBefore) {
		t.Errorf("rule modified")
	}
}

func TestCloneWithoutObjects(t *testing.T) {
	trigger := namespaceTrigger("ns")
	for name, gen := range map[string]kyvernov1.GeneratePattern{
		"clone": {ResourceSpec: kyvernov1.ResourceSpec{APIVersion: "v1", Kind: "Secret", Name: "s", Namespace: "ns"},
			Clone: kyvernov1.CloneFrom{Namespace: "default", Name: "s"}},
		"cloneList": {ResourceSpec: kyvernov1.ResourceSpec{Namespace: "ns"},
			CloneList: kyvernov1.CloneList{Namespace: "default", Kinds: []string{"v1/Secret"}}},
	} {
		rule := dataRule(t, kyvernov1.Generation{GeneratePattern: gen})
		_, err := Generate(context.Background(), PolicyRef{Name: "p"}, rule, RefOf(trigger), triggerDocument(t, trigger, nil), Env{})
		if err == nil || !strings.Contains(err.Error(), "no cluster objects") {
			t.Errorf("%s: error = %v", name, err)
		}
	}
}

func TestGenerateWithoutGenerateBlock(t *testing.T) {
	if _, err := Generate(context.Background(), PolicyRef{}, &kyvernov1.Rule{Name: "v"}, ObjectRef{}, nil, Env{}); err == nil {
		t.Fatal("want an error for a rule without generate")
	}
}

func TestObjects(t *testing.T) {
	objs := NewObjects(
		map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "b", "namespace": "x", "labels": map[string]any{"t": "1"}}},
		map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "a", "namespace": "x"}},
		map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "c", "namespace": "y"}},
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "x"}},
	)
	ctx := context.Background()
	names := func(list []map[string]any) string {
		var out []string
		for _, o := range list {
			out = append(out, RefOf(o).Namespace+"/"+RefOf(o).Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		apiVersion, namespace string
		selector              labels.Selector
		want                  string
	}{
		{"v1", "x", nil, "x/a,x/b"},
		{"", "x", nil, "x/a,x/b"},
		{"v1", "", nil, "x/a,x/b,y/c"},
		{"v1", "x", labels.SelectorFromSet(labels.Set{"t": "1"}), "x/b"},
		{"v2", "x", nil, ""},
	} {
		got, err := objs.List(ctx, tc.apiVersion, "Secret", tc.namespace, tc.selector)
		if err != nil || names(got) != tc.want {
			t.Errorf("List(%q, Secret, %q, %v) = %s, %v; want %s", tc.apiVersion, tc.namespace, tc.selector, names(got), err, tc.want)
		}
	}
	if got, err := objs.Get(ctx, "v1", "ConfigMap", "x", "a"); err != nil || RefOf(got).Kind != "ConfigMap" {
		t.Errorf("Get ConfigMap x/a = %v, %v", got, err)
	}
	if _, err := objs.Get(ctx, "v1", "Secret", "y", "a"); !apierrors.IsNotFound(err) {
		t.Errorf("Get missing: want NotFound, got %v", err)
	}
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string][3]string{
		"Secret":                             {"", "Secret", ""},
		"v1/Secret":                          {"v1", "Secret", ""},
		"apps/v1/Deployment":                 {"apps/v1", "Deployment", ""},
		"a/b/c/D":                            {"", "", "error"},
		"v1/":                                {"", "", "error"},
		"":                                   {"", "", "error"},
		"networking.k8s.io/v1/NetworkPolicy": {"networking.k8s.io/v1", "NetworkPolicy", ""},
	} {
		apiVersion, kind, err := parseKind(in)
		if (err != nil) != (want[2] == "error") || apiVersion != want[0] || kind != want[1] {
			t.Errorf("parseKind(%q) = %q, %q, %v; want %v", in, apiVersion, kind, err, want)
		}
	}
}

// The kyverno test comparison used by the conformance check is strict
// where Kyverno is (row 47, §9.2).
func TestComparableForm(t *testing.T) {
	actual := map[string]any{"apiVersion": "v1", "kind": "X", "metadata": map[string]any{"name": "n",
		"labels": map[string]any{LabelManagedBy: ManagedBy, LabelPolicyName: "p"}}, "spec": map[string]any{"podSelector": map[string]any{}, "n": 1}}
	for _, tc := range []struct {
		name  string
		want  map[string]any
		equal bool
	}{
		{"no labels, no empty map", map[string]any{"apiVersion": "v1", "kind": "X", "metadata": map[string]any{"name": "n"}, "spec": map[string]any{"n": 1.0}}, true},
		{"managed-by helm", map[string]any{"apiVersion": "v1", "kind": "X", "metadata": map[string]any{"name": "n", "labels": map[string]any{LabelManagedBy: "helm"}}, "spec": map[string]any{"n": 1}}, false},
		{"string number", map[string]any{"apiVersion": "v1", "kind": "X", "metadata": map[string]any{"name": "n"}, "spec": map[string]any{"n": "1"}}, false},
		{"extra field", map[string]any{"apiVersion": "v1", "kind": "X", "metadata": map[string]any{"name": "n"}, "spec": map[string]any{"n": 1, "m": ""}}, false},
	} {
		equal := reflect.DeepEqual(testComparable(t, actual), testComparable(t, tc.want))
		if equal != tc.equal {
			t.Errorf("%s: equal = %v, want %v", tc.name, equal, tc.equal)
		}
	}
}
