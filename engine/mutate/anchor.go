package mutate

import "github.com/charter-dev/charter/engine/anchor"

// In a mutate patch only `(k)`, `<(k)` and `+(k)` mean anything; `=(k)`, `X(k)` and
// `^(k)` are written into the resource literally, as Kyverno does (spec §2.2).

// mutateAnchor returns the anchor kind of a patch key and the plain key inside it, or
// anchor.None and the key itself for every key that is plain in a mutate patch.
func mutateAnchor(key string) (anchor.Kind, string) {
	a, ok := anchor.Parse(key)
	if !ok {
		return anchor.None, key
	}
	switch a.Kind {
	case anchor.Condition, anchor.Global, anchor.Add:
		return a.Kind, a.Key
	}
	return anchor.None, key
}

// hasMutateAnchor reports whether v holds a mutate anchor anywhere, of one of kinds
// when they are given.
func hasMutateAnchor(v any, kinds ...anchor.Kind) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if kind, _ := mutateAnchor(k); kind != anchor.None {
				if len(kinds) == 0 {
					return true
				}
				for _, want := range kinds {
					if kind == want {
						return true
					}
				}
			}
			if hasMutateAnchor(child, kinds...) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasMutateAnchor(e, kinds...) {
				return true
			}
		}
	}
	return false
}
