package convert

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Mocks are the values a test suite gives a source policy's context
// entries: globalValues, each rule's values, and each resource's values
// (which Kyverno picks by the resource's name). A conversion reads the
// cluster where its source read a context entry (Output.ClusterReads);
// Apply puts the mocked values in place of those reads, so the converted
// policy runs on the suite's values as the original does.
type Mocks struct {
	Global map[string]any
	// Rules[policy][rule], Resources[policy][resource name].
	Rules, Resources map[string]map[string]map[string]any
}

// mockValue is what values mock for one variable: its own key, or the
// dotted keys under it assembled into a map. ok is false when nothing
// mocks it.
func mockValue(values map[string]any, name string) (any, bool) {
	if v, ok := values[name]; ok {
		return v, true
	}
	var out map[string]any
	for k, v := range values {
		rest, found := strings.CutPrefix(k, name+".")
		if !found {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		m := out
		parts := strings.Split(rest, ".")
		for _, p := range parts[:len(parts)-1] {
			next, _ := m[p].(map[string]any)
			if next == nil {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = v
	}
	return out, out != nil
}

// mockExpr renders a mocked value as CEL. A count's mock is text ("1")
// that Kyverno's operators read as a number: it is the number.
func mockExpr(v any, read ClusterRead) (expr, error) {
	if s, isStr := v.(string); isStr && read.Numeric {
		if n, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			v = n
		}
	}
	return templateValue(v, &jmesScope{})
}

// mocked is the CEL that stands for one cluster read in a suite: the
// per-resource mocks chosen by the object's name, else the rule's (or
// global) mock, else the read itself.
func (m *Mocks) mocked(read ClusterRead, source string, readExpr string) (string, bool, error) {
	values := map[string]any{}
	maps.Copy(values, m.Global)
	maps.Copy(values, m.Rules[source][read.Rule])
	fallback := atom(readExpr)
	mocked := false
	if v, ok := mockValue(values, read.Variable); ok {
		e, err := mockExpr(v, read)
		if err != nil {
			return "", false, err
		}
		fallback, mocked = e, true
	}
	var names []string
	perResource := map[string]expr{}
	for name, values := range m.Resources[source] {
		if v, ok := mockValue(values, read.Variable); ok {
			e, err := mockExpr(v, read)
			if err != nil {
				return "", false, err
			}
			names = append(names, name)
			perResource[name] = e
		}
	}
	if len(names) == 0 {
		return fallback.s, mocked, nil
	}
	slices.Sort(names)
	entries := make([]string, len(names))
	for i, n := range names {
		entries[i] = str(n).s + ": " + perResource[n].s
	}
	return "{" + strings.Join(entries, ", ") + "}[?object.metadata.name].orValue(" + fallback.s + ")", true, nil
}

// Apply returns the converted policy o with the variable of each cluster
// read the mocks give for the source policy's rule set to the mocked
// value; the policy itself when nothing is mocked (or m is nil).
func (m *Mocks) Apply(o Output, source string) (kyvernov1.PolicyInterface, error) {
	policy := o.Object.(kyvernov1.PolicyInterface)
	if m == nil || len(o.ClusterReads) == 0 {
		return policy, nil
	}
	obj, err := ObjectMap(o.Object)
	if err != nil {
		return nil, err
	}
	spec, _ := obj["spec"].(map[string]any)
	vars, _ := spec["variables"].([]any)
	changed := false
	for _, read := range o.ClusterReads {
		if read.Inline != "" {
			// A read bound for each foreach element: the mock takes the
			// place of its text wherever the policy's expressions hold it.
			e, did, err := m.mocked(read, source, read.Inline)
			if err != nil {
				return nil, fmt.Errorf("mock of %s: %w", read.Variable, err)
			}
			if did {
				for _, list := range []string{"validations", "matchConditions", "variables"} {
					items, _ := spec[list].([]any)
					for _, item := range items {
						if im, ok := item.(map[string]any); ok {
							if text, ok := im["expression"].(string); ok && strings.Contains(text, read.Inline) {
								im["expression"], changed = strings.ReplaceAll(text, read.Inline, e), true
							}
						}
					}
				}
			}
			continue
		}
		for _, v := range vars {
			vm, ok := v.(map[string]any)
			if !ok || vm["name"] != read.Variable {
				continue
			}
			e, did, err := m.mocked(read, source, vm["expression"].(string))
			if err != nil {
				return nil, fmt.Errorf("mock of %s: %w", read.Variable, err)
			}
			if did {
				vm["expression"], changed = e, true
			}
		}
	}
	if !changed {
		return policy, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out := reflect.New(reflect.TypeOf(o.Object).Elem()).Interface().(kyvernov1.PolicyInterface)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}
