package cpol

import (
	"fmt"
	"maps"
	"slices"

	"github.com/charter-dev/charter/engine/fault"
)

// ServiceCallFields returns the field paths of the apiCall context entries
// of a kyverno.io policy (its JSON form) that call a URL rather than the
// API server, e.g. spec.rules[0].context[1].apiCall.service.url: wherever
// a context list sits (a rule's, a foreach's at any depth, a mutate
// target's, a CleanupPolicy's own). A namespaced policy may make such a
// call only when the process allows it (charter serve
// --allow-http-in-namespaced-policies). Resource content a rule writes
// (generate data, patches, patterns) is not looked into: a policy there is
// data, not a call.
func ServiceCallFields(obj map[string]any) []string {
	var out []string
	var walk func(path string, v any, inContext bool)
	walk = func(path string, v any, inContext bool) {
		switch t := v.(type) {
		case map[string]any:
			if inContext {
				if call, ok := t["apiCall"].(map[string]any); ok {
					if svc, ok := call["service"].(map[string]any); ok && svc != nil {
						out = append(out, fault.JoinPath(fault.JoinPath(fault.JoinPath(path, "apiCall"), "service"), "url"))
					}
				}
				return
			}
			for _, k := range slices.Sorted(maps.Keys(t)) {
				switch k {
				case "data", "patchStrategicMerge", "patchesJson6902", "pattern", "anyPattern", "cloneList", "clone":
					continue
				}
				field := fault.JoinPath(path, k)
				if list, ok := t[k].([]any); ok && k == "context" {
					for i, e := range list {
						walk(fmt.Sprintf("%s[%d]", field, i), e, true)
					}
					continue
				}
				walk(field, t[k], false)
			}
		case []any:
			for i, e := range t {
				walk(fmt.Sprintf("%s[%d]", path, i), e, false)
			}
		}
	}
	walk("spec", obj["spec"], false)
	return out
}
