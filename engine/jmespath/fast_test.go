package jmespath

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// fastExpressions are queries the fast path covers (and a few it does
// not, which must keep working), with the shapes of the Pod Security
// policies' variables, foreach lists and defaults, and the corners of each
// node: missing keys at every depth, non-map and non-list operands, nil
// and empty operands of ||, negative and out-of-range indexes, pipes.
var fastExpressions = []string{
	"request.operation || 'BACKGROUND'",
	"request.object.spec.[ephemeralContainers, initContainers, containers][]",
	"request.object.spec.[ephemeralContainers, initContainers, containers][].securityContext.capabilities.add[]",
	"element.securityContext.capabilities.drop[] || `[]`",
	"element.securityContext.capabilities.add[] || `[]`",
	"request.object.spec.volumes[].keys(@)[] || `[]`",
	"request.object.metadata.name", "request.object.metadata.missing", "request.object.missing.deeper",
	"missing", "missing.x", "request.object.spec.containers[].name", "request.object.spec.containers[0].name",
	"request.object.spec.containers[-1].image", "request.object.spec.containers[7]", "request.object.spec.containers[-9]",
	"request.object.spec.containers[].ports[].containerPort", "request.object.spec.containers[].ports[]",
	"request.object.spec.containers[][]", "request.object.spec[]", "request.object.spec.containers[].securityContext",
	"request.object.spec.containers[*].name", "request.object.metadata.labels.*", "[request.operation, missing, request.name]",
	"request.[operation, missing]", "missing.[a, b]", "request.object.spec.containers[].[name, image]",
	"request.object.spec.containers[].[name, image][]", "request.object.spec.containers | [0].name", "missing | [0]",
	"request.object.spec.containers[0] | name", "@", "@.request.operation", "request.empty || 'x'", "request.zero || 'x'",
	"request.falsy || request.operation", "request.emptyList || `[1]`", "request.emptyMap || missing", "missing || missing2",
	"request.operation.length", "request.number.x", "request.typed", "request.typed[0]", "request.typed[]",
	"request.typed[].x", "request.typedMap.a", "request.typedMap || 'x'", "request.strct.Name", "request.strct || 'x'",
	"request.ptr.Name", "request.typedEmpty || 'd'", "request.nested[]", "request.nested[][]", "request.mixed[]", "request.typedNil || 'd'",
	"request.object.spec.containers[?name == 'app'].name", "length(request.object.spec.containers)",
	"request.operation == 'CREATE'", "!request.empty", "request.operation && request.name",
	"request.object.spec.containers[0:1].name", "{a: request.operation}", "`\"lit\"`", "'raw'", "`null` || `false`",
	// Lists made for a flatten or a projection above, whose arrays the
	// lists made after them reuse (fastScratch), next to lists kept as
	// elements or results.
	"[request.object.spec.containers[].name, request.object.spec.initContainers[].name][]",
	"(request.emptyList[] || request.object.spec.containers)[].name", "request.object.spec.[containers, initContainers][][].name",
	"request.object.spec.containers[].[name, ports[].containerPort][]", "request.object.spec.containers[].ports[] | [0]",
	"request.object.spec.[containers, initContainers][].securityContext.capabilities.[add, drop][][]",
	"(request.object.spec.containers[].missing[] || `[]`)[]", "request.nested[][] | @[]", "[request.nested[], request.mixed][][]",
}

type fastStruct struct{ Name string }

// fastDocuments are the data: a Pod review's document, and one holding
// values the library reaches with reflection.
func fastDocuments(t testing.TB) []any {
	var pod any
	if err := json.Unmarshal([]byte(`{"request": {"operation": "CREATE", "name": "web", "empty": "", "zero": 0, "falsy": false,
		"emptyList": [], "emptyMap": {}, "number": 3, "nested": [[1, [2]], 3, null, [], {"a": 1}], "mixed": [null, "a", [null]],
		"object": {"metadata": {"name": "web", "labels": {"app": "web", "tier": "x"}},
		"spec": {"containers": [
			{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}, {"name": "x"}],
			 "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN", "CHOWN"]}}},
			{"name": "side", "image": "envoy", "securityContext": {"capabilities": {}}},
			{"name": "bare", "image": "busybox", "securityContext": null}],
		"initContainers": [{"name": "init", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}],
		"volumes": [{"name": "data", "emptyDir": {}}, {"name": "host", "hostPath": {"path": "/"}}]}}}}`), &pod); err != nil {
		t.Fatal(err)
	}
	element := map[string]any{"element": map[string]any{"securityContext": map[string]any{"capabilities": map[string]any{"drop": []any{"ALL"}}}}}
	noElement := map[string]any{"element": map[string]any{"name": "x"}}
	var typedNil map[string]any
	reflective := map[string]any{"request": map[string]any{
		"operation": "UPDATE", "typed": []string{"a", "b"}, "typedMap": map[string]string{"a": "b"},
		"strct": fastStruct{Name: "s"}, "ptr": &fastStruct{Name: "p"}, "typedNil": typedNil, "typedEmpty": []string{},
		"nested": []any{[]string{"x"}, []any{"y"}}, "mixed": []any{[]int{1}},
		"object": map[string]any{"spec": map[string]any{"containers": []map[string]any{{"name": "typed"}}}},
	}}
	return []any{pod, element, noElement, reflective, nil, "string", 1.0, []any{}, map[string]any{}, []any{map[string]any{"request": nil}}}
}

// TestFastMatchesLibrary evaluates every query over every document with
// Query.Search (fast path first) and with the library alone: the results,
// or the error texts, must be the same, nil and empty lists told apart.
func TestFastMatchesLibrary(t *testing.T) {
	i := New()
	docs := fastDocuments(t)
	covered, answered := 0, 0
	for _, expr := range fastExpressions {
		q, err := i.Compile(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		if q.fast != nil {
			covered++
		}
		for d, doc := range docs {
			want, wantErr := librarySearch(q, doc)
			got, gotErr := q.Search(doc)
			if strings.Contains(expr, "keys(") || strings.Contains(expr, ".*") {
				// keys() and a value projection list a map's keys or
				// values in Go's map order, which differs from one call
				// to the next: compare them as sets.
				want, got = sortedStrings(want), sortedStrings(got)
			}
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
				t.Errorf("%q over document %d: got %#v, %v; the library gives %#v, %v", expr, d, got, gotErr, want, wantErr)
			}
			if q.fast != nil {
				if _, st := q.fast.eval(fastValue{v: doc}, nil); st == fastOK {
					answered++
				}
			}
		}
	}
	if covered < len(fastExpressions)/2 || answered == 0 {
		t.Fatalf("the fast path covers %d of %d queries and answered %d evaluations: not exercised", covered, len(fastExpressions), answered)
	}
	for _, expr := range []string{"request.operation || 'BACKGROUND'", "request.object.spec.[ephemeralContainers, initContainers, containers][]",
		"element.securityContext.capabilities.drop[] || `[]`"} {
		if q, _ := i.Compile(expr); q.fast == nil {
			t.Errorf("%q is not on the fast path", expr)
		}
	}
}

// sortedStrings returns a list of strings sorted, anything else as it is.
func sortedStrings(v any) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return v
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func librarySearch(q *Query, data any) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("JMESPath query %q panicked: %v", q.expr, r)
		}
	}()
	return q.parsed.Search(data, q.opt)
}

// FuzzFastMatchesLibrary compares the fast path with the library on any
// expression over JSON documents.
func FuzzFastMatchesLibrary(f *testing.F) {
	for _, e := range fastExpressions {
		f.Add(e, `{"a": {"b": [1, [2, null], {"c": ""}]}, "d": [], "e": {}}`)
	}
	f.Add("a.b[].c || `[]`", `{"a": {"b": [{"c": []}, {"c": [1]}, 2]}}`)
	f.Add("[a, b][][]", `{"a": [[1]], "b": null}`)
	i := New()
	f.Fuzz(func(t *testing.T, expr, doc string) {
		if len(expr) > 200 || len(doc) > 2000 {
			return
		}
		var data any
		if json.Unmarshal([]byte(doc), &data) != nil {
			return
		}
		q, err := i.Compile(expr)
		if err != nil || q.fast == nil {
			return
		}
		want, wantErr := librarySearch(q, data)
		got, gotErr := q.Search(data)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q over %s: got %#v, %v; the library gives %#v, %v", expr, doc, got, gotErr, want, wantErr)
		}
	})
}
