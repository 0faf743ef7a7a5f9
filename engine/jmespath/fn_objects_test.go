package jmespath

import "testing"

func TestObjectFunctions(t *testing.T) {
	const labels = `{"sel": {"app": "web"}, "labels": {"app": "web", "tier": "fe"}, "other": {"app": "db"}}`
	runFnCases(t, []fnCase{
		{expr: "label_match(sel, labels)", data: labels, want: true},
		{expr: "label_match(sel, other)", data: labels, want: false},
		{expr: "label_match(labels, sel)", data: labels, want: false},
		{expr: "label_match(`{}`, other)", data: labels, want: true},
		{expr: "label_match(sel, 'x')", data: labels, wantErr: "Invalid type for: x"},
		{expr: "lookup(labels, 'tier')", data: labels, want: "fe"},
		{expr: "lookup(labels, 'none')", data: labels, want: nil},
		{expr: "lookup(`[10, 20]`, `1`)", want: 20.0},
		{expr: "lookup(`[10, 20]`, `2`)", want: nil},
		{expr: "lookup(`[10, 20]`, `-1`)", want: nil},
		{expr: "lookup(`[10, 20]`, `0.5`)", wantErr: "must be an integer"},
		{expr: "lookup(`[10, 20]`, '0')", wantErr: "must be a number"},
		{expr: "lookup(labels, `1`)", data: labels, wantErr: "must be a string"},
		{expr: "items(labels, 'key', 'value')", data: labels, want: []any{
			map[string]any{"key": "app", "value": "web"},
			map[string]any{"key": "tier", "value": "fe"},
		}},
		{expr: "items(`[\"a\", \"b\"]`, 'i', 'v')", want: []any{
			map[string]any{"i": 0.0, "v": "a"},
			map[string]any{"i": 1.0, "v": "b"},
		}},
		{expr: "object_from_lists(`[\"a\", \"b\", 3, true]`, `[1, 2]`)", want: map[string]any{"a": 1.0, "b": 2.0, "3": nil, "true": nil}},
		{expr: "object_from_lists(`[[1]]`, `[1]`)", wantErr: "cannot use array as an object key"},
		{expr: "parse_json('{\"a\": [1, \"x\"]}')", want: map[string]any{"a": []any{1.0, "x"}}},
		{expr: "parse_json('{')", wantErr: "JMESPath function 'parse_json'"},
		{expr: "parse_yaml('a: 1\nb: [x, true]')", want: map[string]any{"a": 1.0, "b": []any{"x", true}}},
		{expr: "parse_yaml('a: [')", wantErr: "JMESPath function 'parse_yaml'"},
		{expr: "parse_yaml('- 1')", want: []any{1.0}},
	})
}
