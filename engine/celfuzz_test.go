package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
)

// celFuzzPolicy is a ValidatingPolicy on ConfigMaps whose variable and
// validation are the fuzzed expression: the two CEL paths charter budgets
// apart (variables are charged to the validation that reads them).
func celFuzzPolicy(t testing.TB, expression string) kyvernov1.PolicyInterface {
	t.Helper()
	doc := map[string]any{
		"apiVersion": "policies.kyverno.io/v1",
		"kind":       "ValidatingPolicy",
		"metadata":   map[string]any{"name": "fuzz"},
		"spec": map[string]any{
			"validationActions": []any{"Deny"},
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"configmaps"},
				"operations": []any{"CREATE", "UPDATE"},
			}}},
			"variables":   []any{map[string]any{"name": "v", "expression": expression}},
			"validations": []any{map[string]any{"expression": expression}, map[string]any{"expression": "variables.v == variables.v"}},
		},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := &policiesv1.ValidatingPolicy{}
	if err := json.Unmarshal(data, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// nested is a JSON object depth levels deep.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + `"x"` + strings.Repeat("}", depth)
}

// FuzzCELValidation compiles the fuzzed expression as a ValidatingPolicy's
// variable and validation, then evaluates it against a hostile ConfigMap
// (the fuzzed JSON: deep nesting, huge strings, long lists). Compile either
// refuses it with faults naming the field, or gives a policy whose
// evaluation ends with pass, fail or error, never a panic: runaway
// expressions are stopped by the API server's cost limits, estimated at
// compile time and enforced while they run.
func FuzzCELValidation(f *testing.F) {
	huge := strings.Repeat("x", 1<<20)
	longList := "[" + strings.TrimSuffix(strings.Repeat(`"a",`, 2000), ",") + "]"
	for _, s := range [][2]string{
		{"object.metadata.name == 'c'", `{"metadata":{"name":"c"}}`},
		{"has(object.data) && object.data.all(k, size(object.data[k]) < 10)", `{"data":{"a":"` + huge + `"}}`},
		{"object.data.exists(k, object.data[k].matches('^(a+)+$'))", `{"data":{"a":"` + strings.Repeat("a", 5000) + `!"}}`},
		{"object.data.a.contains('y')", `{"data":{"a":"` + huge + `"}}`},
		{"object.spec.l.all(x, object.spec.l.all(y, object.spec.l.all(z, x == y && y == z)))", `{"spec":{"l":` + longList + `}}`},
		{"object.spec.l.map(x, object.spec.l.map(y, x + y)).size() > 0", `{"spec":{"l":` + longList + `}}`},
		{"object.spec.a.a.a.a.a.a.a.a == 'x'", `{"spec":` + nested(5000) + `}`},
		{"string(object.spec) != ''", `{"spec":` + nested(5000) + `}`},
		{"json.marshal(object) != ''", `{"spec":` + nested(1000) + `}`},
		{"[1,2,3].all(i, [1,2,3].all(j, [1,2,3].all(k, i+j+k > 0)))", `{}`},
		{"object.data.a.split('').size() > 0", `{"data":{"a":"` + huge + `"}}`},
		{"1/0 == 1", `{}`},
		{"object.nope.nope", `{}`},
		{"'a' + 1", `{}`},
		{"variables.v", `{}`},
		{"object.data", `{"data":null}`},
		{"(", `{"metadata":1}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, expression, object string) {
		var obj map[string]any
		if json.Unmarshal([]byte(object), &obj) != nil || obj == nil {
			return
		}
		obj["apiVersion"], obj["kind"] = "v1", "ConfigMap"
		meta, _ := obj["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["name"], meta["namespace"] = "c", "default"
		obj["metadata"] = meta

		set, err := Compile([]kyvernov1.PolicyInterface{celFuzzPolicy(t, expression)})
		if err != nil {
			var faults fault.List
			if !errors.As(err, &faults) || len(faults) == 0 {
				t.Fatalf("Compile failed without faults: %T %v", err, err)
			}
			for _, f := range faults {
				if !strings.HasPrefix(f.Field, "spec.") || f.Fault == "" {
					t.Fatalf("a fault that does not name its field: %+v", f)
				}
			}
			return
		}
		resp := set.Validate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: obj})
		if len(resp.Policies) != 1 || len(resp.Policies[0].Rules) != 1 {
			t.Fatalf("want one policy with one result, got %+v", resp.Policies)
		}
		switch r := resp.Policies[0].Rules[0]; r.Status {
		case review.StatusPass, review.StatusFail:
		case review.StatusError:
			if r.Message == "" {
				t.Fatal("an error result without a message")
			}
		default:
			t.Fatalf("result %q (%s) for a ValidatingPolicy that matches", r.Status, r.Message)
		}
	})
}
