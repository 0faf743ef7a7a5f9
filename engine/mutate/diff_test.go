package mutate

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name          string
		before, after string
		want          string
	}{
		{"no change", `{a: 1}`, `{a: 1}`, `null`},
		{"numbers compare by value", `{a: 1}`, `{a: 1.0}`, `null`},
		{"add remove replace in key order", `{b: 1, c: 2, z: 0}`, `{a: x, b: 2, z: 0}`,
			`[{"op":"remove","path":"/c"},{"op":"add","path":"/a","value":"x"},{"op":"replace","path":"/b","value":2}]`},
		{"escaped keys", `{m: {}}`, `{m: {"a/b~c": "1"}}`, `[{"op":"add","path":"/m/a~1b~0c","value":"1"}]`},
		{"prepend is one add", `{l: [{name: c1}, {name: c2}]}`, `{l: [{name: c0}, {name: c1}, {name: c2}]}`,
			`[{"op":"add","path":"/l/0","value":{"name":"c0"}}]`},
		{"append is one add", `{l: [a, b]}`, `{l: [a, b, c]}`, `[{"op":"add","path":"/l/2","value":"c"}]`},
		{"middle removal", `{l: [a, b, c]}`, `{l: [a, c]}`, `[{"op":"remove","path":"/l/1"}]`},
		{"element field change", `{l: [{n: 1, x: a}, {n: 2}]}`, `{l: [{n: 1, x: b}, {n: 2}]}`,
			`[{"op":"replace","path":"/l/0/x","value":"b"}]`},
		{"null value kept in op", `{a: 1}`, `{a: null}`, `[{"op":"replace","path":"/a","value":null}]`},
		{"false value kept in op", `{}`, `{a: false}`, `[{"op":"add","path":"/a","value":false}]`},
		{"type change replaces", `{a: {b: 1}}`, `{a: [1]}`, `[{"op":"replace","path":"/a","value":[1]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, after := mustYAML(t, tt.before), mustYAML(t, tt.after)
			got, err := json.Marshal(Diff(before, after))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Diff = %s\nwant  %s", got, tt.want)
			}
			assertRoundTrip(t, before, after)
		})
	}
}

func TestMarshalPatchEmpty(t *testing.T) {
	b, err := MarshalPatch(nil)
	if err != nil || b != nil {
		t.Fatalf("MarshalPatch(nil) = %q, %v; want nil, nil", b, err)
	}
}

// TestDiffRoundTrip is the property: for random before/after pairs, applying
// Diff(before, after) to before with a standard RFC 6902 implementation gives after.
func TestDiffRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		before := randomObject(r, 3)
		after := mutateRandomly(r, before, 3).(map[string]any)
		assertRoundTrip(t, before, after)
		if t.Failed() {
			t.Fatalf("case %d failed", i)
		}
	}
}

func assertRoundTrip(t *testing.T, before, after map[string]any) {
	t.Helper()
	ops := Diff(before, after)
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		t.Fatalf("Diff produced an undecodable patch %s: %v", raw, err)
	}
	doc, _ := json.Marshal(before)
	out, err := patch.Apply(doc)
	if err != nil {
		t.Fatalf("applying %s to %s: %v", raw, doc, err)
	}
	got, err := decodeObject(out)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(got, after) {
		want, _ := json.Marshal(after)
		t.Errorf("round trip: patch %s on %s gave %s, want %s", raw, doc, out, want)
	}
}

func randomScalar(r *rand.Rand) any {
	switch r.Intn(5) {
	case 0:
		return fmt.Sprintf("s%d", r.Intn(4))
	case 1:
		return int64(r.Intn(4))
	case 2:
		return r.Intn(2) == 0
	case 3:
		return nil
	}
	return 1.5
}

func randomValue(r *rand.Rand, depth int) any {
	if depth == 0 {
		return randomScalar(r)
	}
	switch r.Intn(3) {
	case 0:
		return randomObject(r, depth-1)
	case 1:
		l := make([]any, r.Intn(5))
		for i := range l {
			l[i] = randomValue(r, depth-1)
		}
		return l
	}
	return randomScalar(r)
}

// randomKeys leaves out "": RFC 6901 allows an empty key, but json-patch (here and in
// the API server) cannot follow one in the middle of a path, and Kubernetes objects
// never have one.
var randomKeys = []string{"a", "b", "c", "a/b", "t~x"}

func randomObject(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for i := r.Intn(4); i > 0; i-- {
		m[randomKeys[r.Intn(len(randomKeys))]] = randomValue(r, depth)
	}
	return m
}

// mutateRandomly returns a changed deep copy of v: keys added, removed and changed,
// list elements inserted, removed and edited.
func mutateRandomly(r *rand.Rand, v any, depth int) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			switch r.Intn(4) {
			case 0: // drop
			case 1:
				out[k] = mutateRandomly(r, x, depth-1)
			default:
				out[k] = x
			}
		}
		if r.Intn(2) == 0 {
			out[randomKeys[r.Intn(len(randomKeys))]] = randomValue(r, max(depth-1, 0))
		}
		return out
	case []any:
		out := make([]any, 0, len(t)+2)
		for _, x := range t {
			switch r.Intn(5) {
			case 0: // drop
			case 1:
				out = append(out, randomValue(r, max(depth-1, 0)), x)
			case 2:
				out = append(out, mutateRandomly(r, x, depth-1))
			default:
				out = append(out, x)
			}
		}
		if r.Intn(3) == 0 {
			out = append([]any{randomScalar(r)}, out...)
		}
		return out
	}
	if r.Intn(2) == 0 {
		return randomValue(r, max(depth, 0))
	}
	return v
}
