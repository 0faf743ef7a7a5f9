package mutate

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Operation is one RFC 6902 operation, as an AdmissionResponse carries it.
type Operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// MarshalJSON writes value for add and replace even when it is null, false or 0.
func (o Operation) MarshalJSON() ([]byte, error) {
	type withValue struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	type withoutValue struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	if o.Op == "remove" {
		return json.Marshal(withoutValue{o.Op, o.Path})
	}
	return json.Marshal(withValue(o))
}

// Diff returns one RFC 6902 patch that turns before into after. It is deterministic
// (map keys in sorted order) and small: unchanged subtrees produce nothing, maps are
// compared key by key, and lists keep their common head and tail and patch only the
// middle, so that a prepended element is one `add` and an appended one an `add` at
// `/-`-equivalent index. Applying the result to before yields after (see Equal).
func Diff(before, after map[string]any) []Operation {
	var ops []Operation
	diffMaps(&ops, "", before, after)
	return ops
}

// MarshalPatch encodes operations as the JSON array an AdmissionResponse carries;
// nil when there are none (no patch is sent then).
func MarshalPatch(ops []Operation) ([]byte, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

func diffValues(ops *[]Operation, path string, a, b any) {
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			diffMaps(ops, path, av, bv)
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			diffLists(ops, path, av, bv)
			return
		}
	}
	if !Equal(a, b) {
		*ops = append(*ops, Operation{Op: "replace", Path: path, Value: b})
	}
}

func diffMaps(ops *[]Operation, path string, a, b map[string]any) {
	for _, k := range sortedKeys(a) {
		if _, ok := b[k]; !ok {
			*ops = append(*ops, Operation{Op: "remove", Path: path + "/" + escapePointer(k)})
		}
	}
	for _, k := range sortedKeys(b) {
		p := path + "/" + escapePointer(k)
		av, ok := a[k]
		if !ok {
			*ops = append(*ops, Operation{Op: "add", Path: p, Value: b[k]})
			continue
		}
		diffValues(ops, p, av, b[k])
	}
}

// diffLists patches the part of a list between its unchanged head and tail: the
// elements both middles have are diffed in place, surplus ones in a are removed
// (highest index first, so indices stay valid) and surplus ones in b are added.
func diffLists(ops *[]Operation, path string, a, b []any) {
	head := 0
	for head < len(a) && head < len(b) && Equal(a[head], b[head]) {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && Equal(a[len(a)-1-tail], b[len(b)-1-tail]) {
		tail++
	}
	am, bm := a[head:len(a)-tail], b[head:len(b)-tail]
	common := min(len(am), len(bm))
	for i := 0; i < common; i++ {
		diffValues(ops, path+"/"+strconv.Itoa(head+i), am[i], bm[i])
	}
	for i := len(am) - 1; i >= common; i-- {
		*ops = append(*ops, Operation{Op: "remove", Path: path + "/" + strconv.Itoa(head+i)})
	}
	for i := common; i < len(bm); i++ {
		*ops = append(*ops, Operation{Op: "add", Path: path + "/" + strconv.Itoa(head+i), Value: bm[i]})
	}
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Equal reports whether two unstructured values are equal as JSON documents: maps by
// content, lists in order, numbers by value whatever their Go type.
func Equal(a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, x := range av {
			y, ok := bv[k]
			if !ok || !Equal(x, y) {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !Equal(av[i], bv[i]) {
				return false
			}
		}
		return true
	case string:
		bv, ok := b.(string)
		return ok && av == bv
	case bool:
		bv, ok := b.(bool)
		return ok && av == bv
	case nil:
		return b == nil
	}
	if af, ok := toFloat(a); ok {
		if ai, ok := asInt64(a); ok {
			if bi, ok := asInt64(b); ok {
				return ai == bi
			}
		}
		bf, ok := toFloat(b)
		return ok && af == bf
	}
	// Anything else (json.Number, typed structs): compare encodings.
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case float32:
		return float64(t), true
	}
	if i, ok := asInt64(v); ok {
		return float64(i), true
	}
	return 0, false
}
