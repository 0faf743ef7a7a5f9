package mutate

import "strings"

// anchorKind is what a patch key means to the pre-processor. Kyverno recognises the
// keys `(k)`, `<(k)`, `+(k)`, `=(k)`, `X(k)` and `^(k)`; in a mutate patch only the
// first three mean anything, the others are written into the resource literally
// (spec §2.2). A tiny private parser is enough here; engine/pattern owns the full
// validate-side anchor semantics.
type anchorKind int

const (
	plainKey    anchorKind = iota
	condition              // (k): the map is patched only where the pattern matches
	global                 // <(k): the whole patch applies only where the pattern matches
	addIfAbsent            // +(k): set k only when the resource has no k
	equality               // =(k): validate only
	negation               // X(k): validate only
	existence              // ^(k): validate only
)

var prefixKinds = [256]anchorKind{'<': global, '+': addIfAbsent, '=': equality, 'X': negation, '^': existence}

// parseAnchor splits a map key into its anchor kind and the plain key inside it.
func parseAnchor(key string) (anchorKind, string) {
	k := strings.TrimSpace(key)
	if len(k) < 3 || k[len(k)-1] != ')' {
		return plainKey, key
	}
	kind := condition
	switch k[0] {
	case '(':
		k = k[1 : len(k)-1]
	case '<', '+', '=', 'X', '^':
		if k[1] != '(' {
			return plainKey, key
		}
		kind = prefixKinds[k[0]]
		k = k[2 : len(k)-1]
	default:
		return plainKey, key
	}
	if k == "" {
		return plainKey, key
	}
	return kind, k
}

// mutateAnchor is parseAnchor restricted to the anchors that mean something in a
// mutate patch; every other key is plain.
func mutateAnchor(key string) (anchorKind, string) {
	kind, k := parseAnchor(key)
	switch kind {
	case condition, global, addIfAbsent:
		return kind, k
	}
	return plainKey, key
}

// hasMutateAnchor reports whether v holds a `(k)`, `<(k)` or `+(k)` key anywhere.
func hasMutateAnchor(v any, kinds ...anchorKind) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			kind, _ := mutateAnchor(k)
			if kind != plainKey {
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
