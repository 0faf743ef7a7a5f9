package mutate

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/charter-dev/charter/engine/anchor"
)

// ErrConditionNotMet is matched (errors.Is) by every *ConditionError: a `(k)` anchor
// at map level or a `<(k)` anchor did not hold, so the whole patch is skipped.
var ErrConditionNotMet = errors.New("patch condition not met")

// ErrGlobalConditionNotMet is matched only by a *ConditionError from a `<(k)` anchor.
var ErrGlobalConditionNotMet = errors.New("patch global condition not met")

// ConditionError says that the patch was skipped because an anchor condition did
// not hold. Kyverno turns it into a `skip` "no patches applied", the same as a patch
// that changes nothing; Global tells a `<(k)` anchor apart for callers that report it.
type ConditionError struct {
	Global bool
	// Path is the slash path of the anchor key in the patch, e.g. /spec/(nodeSelector).
	Path string
}

func (e *ConditionError) Error() string {
	kind := "condition"
	if e.Global {
		kind = "global condition"
	}
	return fmt.Sprintf("%s %s not met", kind, e.Path)
}

// Is lets errors.Is match the sentinels above.
func (e *ConditionError) Is(target error) bool {
	return target == ErrConditionNotMet || (e.Global && target == ErrGlobalConditionNotMet)
}

// preprocess resolves the anchors of a patch against the resource and returns a
// plain strategic-merge patch (spec §2.2). It never modifies its arguments: the
// patch belongs to a compiled policy shared by concurrent requests.
func preprocess(patch map[string]any, resource map[string]any) (map[string]any, error) {
	return preprocessMap(patch, resource, "", rootSchema(resource, patch))
}

// rootSchema is the schema kyaml will merge with: its built-in Kubernetes v1.21.2
// OpenAPI for the resource's apiVersion and kind (the patch's when the resource has
// none), or nil for kinds it does not know.
func rootSchema(docs ...map[string]any) *openapi.ResourceSchema {
	for _, d := range docs {
		apiVersion, _ := d["apiVersion"].(string)
		kind, _ := d["kind"].(string)
		if apiVersion == "" || kind == "" {
			continue
		}
		if s := openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: kind}); s != nil {
			return s
		}
	}
	return nil
}

func preprocessMap(patch map[string]any, resource any, path string, s *openapi.ResourceSchema) (map[string]any, error) {
	res, _ := resource.(map[string]any)

	// Conditions first: global anchors, then plain conditions, each in key order so
	// that the reported path does not depend on map iteration.
	keys := sortedKeys(patch)
	for _, want := range [2]anchor.Kind{anchor.Global, anchor.Condition} {
		for _, key := range keys {
			kind, k := mutateAnchor(key)
			if kind != want {
				continue
			}
			rv, present := res[k]
			if !present || !conditionValueHolds(patch[key], rv) {
				return nil, &ConditionError{Global: kind == anchor.Global, Path: path + "/" + key}
			}
		}
	}

	out := make(map[string]any, len(patch))
	for _, key := range keys {
		kind, k := mutateAnchor(key)
		switch kind {
		case anchor.Condition:
			// The pattern never reaches the resource, even when it has plain keys
			// (Kyverno's quirk Q4 writes them: see TestQ4ConditionPatternNotWritten),
			// but the add anchors in it do: (emptyDir): {+(sizeLimit): 20Mi} adds
			// sizeLimit to the emptyDir that lacks it, as Kyverno does.
			adds, err := conditionAdds(patch[key], res[k], path+"/"+k, fieldSchema(s, k))
			if err != nil {
				return nil, err
			}
			if len(adds) > 0 {
				out[k] = adds
			}
			continue
		case anchor.Global:
			continue
		case anchor.Add:
			if _, present := res[k]; present {
				continue // never clobber what the user set
			}
		}
		child, keep, err := preprocessValue(patch[key], res[k], path+"/"+k, fieldSchema(s, k))
		if err != nil {
			return nil, err
		}
		if keep {
			out[k] = child
		}
	}
	return out, nil
}

// conditionAdds returns what the `+(k)` keys of a condition's pattern add to
// the resource value the condition held for: each key it lacks, with the
// pattern's value (anchors below resolved); nil when there is nothing to add.
func conditionAdds(pattern, resource any, path string, s *openapi.ResourceSchema) (map[string]any, error) {
	pm, ok := pattern.(map[string]any)
	if !ok {
		return nil, nil
	}
	res, _ := resource.(map[string]any)
	var out map[string]any
	for _, key := range sortedKeys(pm) {
		kind, k := mutateAnchor(key)
		if kind != anchor.Add {
			continue
		}
		if _, present := res[k]; present {
			continue
		}
		child, keep, err := preprocessValue(pm[key], nil, path+"/"+k, fieldSchema(s, k))
		if err != nil {
			return nil, err
		}
		if keep {
			if out == nil {
				out = map[string]any{}
			}
			out[k] = child
		}
	}
	return out, nil
}

// conditionValueHolds evaluates the pattern of a `(k)` / `<(k)` anchor. Kyverno skips
// the check when the pattern map carries `+(k)` keys; such a pattern asks only that
// the key exist, which the caller has checked.
func conditionValueHolds(pattern, value any) bool {
	if m, ok := pattern.(map[string]any); ok {
		for k := range m {
			if kind, _ := mutateAnchor(k); kind == anchor.Add {
				return true
			}
		}
	}
	return conditionHolds(pattern, value)
}

// preprocessValue resolves anchors below one patch value. keep is false when the
// value must be left out of the patch: a map or list that anchors emptied.
func preprocessValue(v any, resource any, path string, s *openapi.ResourceSchema) (any, bool, error) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			// Written empty on purpose (emptyDir: {}): Kyverno strips it (quirk Q3),
			// which adds an invalid volume. See TestQ3EmptyMapKept.
			return t, true, nil
		}
		out, err := preprocessMap(t, resource, path, s)
		if err != nil {
			return nil, false, err
		}
		return out, len(out) > 0, nil
	case []any:
		return preprocessList(t, resource, path, s)
	}
	return v, true, nil
}

// preprocessList resolves the anchored elements of a list of maps (spec §2.2).
//
// On a list the strategic merge merges by key (containers by name, ports by
// containerPort, ...), conditions select resource elements and each selected element
// becomes a copy of the patch element, anchors resolved against that very element,
// carrying the resource element's merge key; the merge then applies it in place and,
// as Kyverno's Prepend merge does, moves it to the front.
//
// Unlike Kyverno, each resource element is evaluated on its own copy of the patch
// element (Kyverno decides `+(k)` once for all: quirk Q1), a plain merge key in an
// anchored element (`name: c2`) selects the element with that key (Kyverno ignores
// it), any number of anchored elements may share a list (Kyverno corrupts it: quirk
// Q2), and elements are identified by the list's merge key rather than always by
// `name`. Lists the merge would replace wholesale (tolerations, every CRD list) are
// edited in place instead: see preprocessReplacedList.
func preprocessList(list []any, resource any, path string, s *openapi.ResourceSchema) (any, bool, error) {
	if len(list) == 0 {
		return list, true, nil // `tolerations: []` replaces the list
	}
	if _, ok := list[0].(map[string]any); !ok {
		return list, true, nil
	}
	resList, _ := resource.([]any)
	es := elementSchema(s)
	keys, merged := mergeKeys(s)
	if !merged && hasMutateAnchor(list) {
		return preprocessReplacedList(list, resList, path, es)
	}

	out := make([]any, 0, len(list))
	byKey := map[string]int{}
	add := func(elem map[string]any) {
		id, ok := identity(elem, keys)
		if !ok {
			out = append(out, elem)
			return
		}
		if i, seen := byKey[id]; seen {
			out[i] = mergeMaps(out[i].(map[string]any), elem)
			return
		}
		byKey[id] = len(out)
		out = append(out, elem)
	}

	for i, e := range list {
		elem, ok := e.(map[string]any)
		if !ok {
			out = append(out, e)
			continue
		}
		if !hasMutateAnchor(elem) {
			plain, err := resolveDeletes(elem, resList, path, es)
			if err != nil {
				return nil, false, err
			}
			for _, p := range plain {
				add(p)
			}
			continue
		}
		hasGlobal := hasMutateAnchor(elem, anchor.Global)
		satisfied := false
		var globalErr error
		for j, r := range resList {
			rm, _ := r.(map[string]any)
			if !selects(elem, rm, keys) {
				continue
			}
			got, err := preprocessMap(elem, rm, fmt.Sprintf("%s/%d", path, j), es)
			var ce *ConditionError
			if errors.As(err, &ce) {
				if ce.Global {
					globalErr = err
				}
				continue
			}
			if err != nil {
				return nil, false, err
			}
			if hasGlobal {
				// A global anchor in an element gates the rest of the patch; the
				// element's own body is never applied (spec §2.3).
				satisfied = true
				continue
			}
			if !hasFieldsBesides(got, keys) {
				continue // nothing but anchors
			}
			if !setIdentity(got, rm, keys) {
				continue // the element has no merge key: nothing can address it
			}
			add(got)
		}
		if hasGlobal && !satisfied {
			if globalErr == nil {
				globalErr = &ConditionError{Global: true, Path: fmt.Sprintf("%s/%d", path, i)}
			}
			return nil, false, globalErr
		}
	}
	if len(out) == 0 {
		return nil, false, nil // emptied by anchors: leave the resource's list alone
	}
	return out, true, nil
}

// preprocessReplacedList handles anchored elements in a list the merge replaces
// wholesale. Kyverno there replaces the user's list with the generated elements only
// (quirk Q5: unselected CRD items are lost) or, when elements have no `name`, applies
// nothing (tolerations, spec §10 row 17). charter edits the resource's list in place:
// every selected element is merged with the element's body, the others are kept, and
// plain patch elements are appended. The result replaces the list.
func preprocessReplacedList(list, resList []any, path string, es *openapi.ResourceSchema) (any, bool, error) {
	result := make([]any, len(resList))
	copy(result, resList)
	changed := false
	var plain []any
	for i, e := range list {
		elem, ok := e.(map[string]any)
		if !ok || !hasMutateAnchor(elem) {
			plain = append(plain, e)
			continue
		}
		hasGlobal := hasMutateAnchor(elem, anchor.Global)
		satisfied := false
		var globalErr error
		for j, r := range resList {
			rm, _ := r.(map[string]any)
			got, err := preprocessMap(elem, rm, fmt.Sprintf("%s/%d", path, j), es)
			var ce *ConditionError
			if errors.As(err, &ce) {
				if ce.Global {
					globalErr = err
				}
				continue
			}
			if err != nil {
				return nil, false, err
			}
			if hasGlobal {
				satisfied = true
				continue
			}
			if len(got) == 0 || rm == nil {
				continue
			}
			m, err := mergeElement(result[j], got, es)
			if err != nil {
				return nil, false, fmt.Errorf("%s/%d: %w", path, j, err)
			}
			result[j] = m
			changed = true
		}
		if hasGlobal && !satisfied {
			if globalErr == nil {
				globalErr = &ConditionError{Global: true, Path: fmt.Sprintf("%s/%d", path, i)}
			}
			return nil, false, globalErr
		}
	}
	if !changed && len(plain) == 0 {
		return nil, false, nil
	}
	return append(result, plain...), true, nil
}

// elementSchema is the schema of a list's elements, or nil.
func elementSchema(s *openapi.ResourceSchema) *openapi.ResourceSchema {
	if s == nil || s.Schema == nil {
		return nil
	}
	return s.Elements()
}

// fieldSchema is the schema of a map's field, or nil.
func fieldSchema(s *openapi.ResourceSchema, field string) *openapi.ResourceSchema {
	if s == nil || s.Schema == nil {
		return nil
	}
	return s.Field(field)
}

// mergeKeys returns the merge keys of a list and whether the strategic merge merges
// it by key at all, deciding as kyaml does: only a schema with patch strategy
// `merge` makes a list associative; without a schema the list is replaced.
func mergeKeys(s *openapi.ResourceSchema) ([]string, bool) {
	if s == nil || s.Schema == nil {
		return nil, false
	}
	strategy, keys := s.PatchStrategyAndKeyList()
	for _, st := range strings.Split(strategy, ",") {
		if st == "merge" {
			if len(keys) == 0 {
				keys = []string{"name"}
			}
			return keys, true
		}
	}
	return nil, false
}

// identity is the merge-key identity of an element, when it has one.
func identity(elem map[string]any, keys []string) (string, bool) {
	var b strings.Builder
	found := false
	for _, k := range keys {
		if v, ok := elem[k]; ok {
			found = true
			b.WriteString(nameKey(v))
		}
		b.WriteByte(0)
	}
	return b.String(), found
}

// selects reports whether an anchored element may apply to a resource element: when
// the element names merge-key values as plain fields, they must be the resource
// element's.
func selects(elem, res map[string]any, keys []string) bool {
	for _, k := range keys {
		if v, ok := elem[k]; ok {
			if res == nil || nameKey(res[k]) != nameKey(v) {
				return false
			}
		}
	}
	return true
}

// hasFieldsBesides reports whether m has a field that is not a merge key.
func hasFieldsBesides(m map[string]any, keys []string) bool {
	for k := range m {
		if !slices.Contains(keys, k) {
			return true
		}
	}
	return false
}

// setIdentity copies the resource element's merge-key values into a generated
// element; false when the resource element has none.
func setIdentity(got, res map[string]any, keys []string) bool {
	found := false
	for _, k := range keys {
		if v, ok := res[k]; ok {
			got[k] = v
			found = true
		}
	}
	return found
}

// nameKey is the identity of a list element's name for matching and de-duplication.
func nameKey(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return "\x00nil"
	}
	if f, ok := toFloat(v); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// mergeMaps returns a with b deep-merged over it; used when two anchored elements
// select the same resource element.
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		am, aok := out[k].(map[string]any)
		bm, bok := v.(map[string]any)
		if aok && bok && !strings.HasPrefix(k, "$") {
			out[k] = mergeMaps(am, bm)
			continue
		}
		out[k] = v
	}
	return out
}

// resolveDeletes makes `$patch: delete` elements name the element they delete by
// every identifying field, whatever the list's merge key is. kyaml finds the element
// by the schema's merge key; an element identified otherwise (volumeMounts by name,
// where the key is mountPath) makes it delete the whole list, as Kyverno does (spec
// §10 row 24, kyverno#13907). Here a delete element is matched on the fields it
// gives and rewritten with the scalar fields of each resource element it matches; one
// that matches nothing is dropped. A plain element holding deletes further down is
// resolved against the resource element of the same name.
func resolveDeletes(elem map[string]any, resList []any, path string, es *openapi.ResourceSchema) ([]map[string]any, error) {
	if elem["$patch"] == "delete" {
		if resList == nil {
			return []map[string]any{elem}, nil
		}
		var out []map[string]any
		for _, r := range resList {
			rm, ok := r.(map[string]any)
			if !ok || !identifies(elem, rm) {
				continue
			}
			del := map[string]any{"$patch": "delete"}
			for k, v := range rm {
				switch v.(type) {
				case map[string]any, []any:
				default:
					del[k] = v
				}
			}
			out = append(out, del)
		}
		return out, nil
	}
	if !hasDeleteDirective(elem) {
		return []map[string]any{elem}, nil
	}
	name, named := elem["name"]
	if !named {
		return []map[string]any{elem}, nil
	}
	for j, r := range resList {
		if rm, ok := r.(map[string]any); ok && nameKey(rm["name"]) == nameKey(name) {
			got, err := preprocessMap(elem, rm, fmt.Sprintf("%s/%d", path, j), es)
			if err != nil {
				return nil, err
			}
			return []map[string]any{got}, nil
		}
	}
	return []map[string]any{elem}, nil
}

// identifies reports whether every scalar field of a delete element equals the
// resource element's.
func identifies(del, res map[string]any) bool {
	for k, v := range del {
		if k == "$patch" {
			continue
		}
		switch v.(type) {
		case map[string]any, []any:
			continue
		}
		rv, ok := res[k]
		if !ok || nameKey(rv) != nameKey(v) {
			return false
		}
	}
	return true
}

// hasDeleteDirective reports whether v holds `$patch: delete` below its top level.
func hasDeleteDirective(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for _, child := range t {
			switch c := child.(type) {
			case map[string]any:
				if c["$patch"] == "delete" || hasDeleteDirective(c) {
					return true
				}
			case []any:
				for _, e := range c {
					if em, ok := e.(map[string]any); ok && (em["$patch"] == "delete" || hasDeleteDirective(em)) {
						return true
					}
				}
			}
		}
	}
	return false
}
