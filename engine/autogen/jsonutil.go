package autogen

import (
	"bytes"
	"encoding/json"
)

// Helpers over decoded JSON (map[string]any, []any, json.Number, ...).

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asStrings(v any) []string {
	var out []string
	for _, e := range asList(v) {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// present reports whether m has key set to something other than null, the
// JSON counterpart of a non-nil pointer, map or slice in Kyverno's types.
func present(m map[string]any, key string) bool {
	v, ok := m[key]
	return ok && v != nil
}

// nonEmpty reports whether a decoded JSON value carries anything: not null,
// "", [] or an object whose fields are all null. It stands in for Kyverno's
// comparisons of a typed field against its zero value.
func nonEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case map[string]any:
		for _, e := range t {
			if e != nil {
				return true
			}
		}
		return false
	case []any:
		return len(t) > 0
	case string:
		return t != ""
	default:
		return true
	}
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

// decode parses JSON keeping numbers as json.Number, so that integers in
// patterns survive the round trip exactly.
func decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// encode writes JSON without HTML escaping, so that the text the variable
// rewrite sees is the text of the policy ("<" stays "<").
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
