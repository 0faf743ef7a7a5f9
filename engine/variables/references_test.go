package variables

import (
	"reflect"
	"strings"
	"testing"
)

func TestSubstituteReferences(t *testing.T) {
	pattern := map[string]any{
		"spec": map[string]any{
			"containers": []any{map[string]any{
				"resources": map[string]any{
					"requests": map[string]any{
						"memory": "$(<=./../../limits/memory)",
						"cpu":    "$(./../../limits/cpu)",
						"gpu":    "$(>./../../limits/gpus)",
					},
					"=(limits)": map[string]any{"memory": "2Gi", "cpu": "500m", "gpus": 2.0},
				},
				"name":  `\$(not-a-reference)`,
				"image": "$(/validate/pattern/spec/containers/0/resources/limits/cpu)",
			}},
		},
	}
	got, err := SubstituteReferences(pattern, WithPath("/validate/pattern"))
	if err != nil {
		t.Fatal(err)
	}
	c := got.(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	req := c["resources"].(map[string]any)["requests"].(map[string]any)
	want := map[string]any{"memory": "<=2Gi", "cpu": "500m", "gpu": ">2.000000"}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("requests = %#v, want %#v", req, want)
	}
	if c["name"] != "$(not-a-reference)" {
		t.Errorf("escaped reference = %q", c["name"])
	}
	if c["image"] != "500m" {
		t.Errorf("absolute reference = %q", c["image"])
	}
}

func TestSubstituteReferenceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  any
		want string
	}{
		{"missing target", map[string]any{"a": "$(./../b)"}, "failed to resolve $(./../b) at path /validate/pattern/a: path /validate/pattern/b not found"},
		{"number without operator", map[string]any{"a": "$(./../b)", "b": 1.0}, "not a string"},
		{"empty reference", map[string]any{"a": "$(<=)"}, "expected path, found empty reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SubstituteReferences(tc.doc, WithPath("/validate/pattern"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want containing %q", err, tc.want)
			}
		})
	}
}

func TestSubstituteResolvesReferencesThenVariables(t *testing.T) {
	r := testResolver(t, ctxDoc)
	doc := map[string]any{"limit": "{{key}}", "msg": "want $(./../limit)"}
	got, err := Substitute(doc, r)
	if err != nil {
		t.Fatal(err)
	}
	// The reference copies the raw text "{{key}}", which the variable pass then resolves.
	if m := got.(map[string]any)["msg"]; m != "want app" {
		t.Errorf("msg = %q", m)
	}
	if got, err := Substitute(doc, r, WithoutReferences()); err != nil || got.(map[string]any)["msg"] != "want $(./../limit)" {
		t.Errorf("WithoutReferences: %v, %v", got, err)
	}
}

func TestCheckBackground(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  any
		want string
	}{
		{"clean", map[string]any{"a": "{{request.object.metadata.name}}", "b": "{{ element.request.userInfo }}"}, ""},
		{"userInfo", map[string]any{"a": []any{"x {{ request.userInfo.username }}"}}, `variable "request.userInfo.username" at path /validate/a/0 uses request.userInfo`},
		{"serviceAccountName in a function", map[string]any{"m": "{{ to_upper(serviceAccountName) }}"}, "uses serviceAccountName"},
		{"roles", map[string]any{"{{ request.clusterRoles }}": "x"}, "uses request.clusterRoles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBackground(tc.doc, "/validate")
			if tc.want == "" {
				if err != nil {
					t.Errorf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want containing %q", err, tc.want)
			}
		})
	}
}
