package celruntime

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/fault"
)

// HTTPLibraryFields returns the field paths of the CEL expressions of a
// policies.kyverno.io object (its JSON form) that read the http library,
// e.g. spec.validations[0].expression: Kyverno refuses a namespaced policy
// that has any (cel-policy-types.md §2.8) unless
// --allowHTTPInNamespacedPolicies. Every field named expression or
// *Expression is looked at, wherever it is; one that does not parse is
// the compiler's fault, not this one's.
func HTTPLibraryFields(obj map[string]any) []string {
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				field := fault.JoinPath(path, k)
				if s, ok := t[k].(string); ok && (k == "expression" || strings.HasSuffix(k, "Expression")) {
					if celenv.ReadsIdent(s, httpVar) {
						out = append(out, field)
					}
					continue
				}
				walk(field, t[k])
			}
		case []any:
			for i, e := range t {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("spec", obj["spec"])
	return out
}
