package mutate

import (
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/kustomize/kyaml/yaml/merge2"
	"sigs.k8s.io/kustomize/kyaml/yaml/walk"
	sigsyaml "sigs.k8s.io/yaml"
)

// StrategicMerge applies a Kyverno patchStrategicMerge to resource and returns the
// patched object. patch is the rule's patch with variables already substituted: a
// map[string]any, or YAML/JSON text.
//
// The patch is first resolved against the resource (spec §2.2):
//   - `+(k): v` sets k only when the resource has no k (even a null k counts as set);
//     on a map or list the whole value is added only when absent.
//   - `(k): pattern` at map level gates the whole patch; in a list element it selects
//     the resource elements the element's body is applied to.
//   - `<(k): pattern` gates the whole patch; in a list element, at least one resource
//     element must match, and the element's body is not applied.
//   - `=(k)`, `X(k)` and `^(k)` mean nothing in a mutate patch and are written
//     literally, as Kyverno does.
//
// The plain patch is then merged with kustomize kyaml's strategic merge, as Kyverno
// does: list merge keys and strategies from kyaml's built-in Kubernetes v1.21.2 schema
// (lists it does not know, including every CRD list, are replaced), new and touched
// list elements first, `null` deletes a key, and `$patch: replace|delete` directives.
//
// Where Kyverno's result is plainly not what a policy author means, charter differs;
// each case has a test named after it:
//   - Q1: `+(k)` in a list element is decided per resource element, not once for all,
//     and a plain `name` in an anchored element selects that element only.
//   - Q2: several anchored elements in one list each apply; Kyverno corrupts the list.
//   - Q3: maps written empty (`emptyDir: {}`) are kept; maps emptied by anchors go.
//   - Q4: the pattern under a `(k)` anchor is never written into the resource.
//   - Q5 and §10 row 17: anchored elements in a list the merge replaces wholesale
//     (tolerations, every CRD list) edit the resource's list in place; Kyverno
//     replaces it with the selected elements only, or applies nothing when the
//     elements have no `name`.
//   - anchored elements are identified by the list's merge key (volumeMounts by
//     mountPath), not always by `name`.
//   - §10 row 24: a `$patch: delete` list element deletes the element it names even
//     when it does not name it by the merge key (volumeMounts by name); Kyverno
//     deletes the whole list.
//
// When a condition does not hold the error is a *ConditionError (errors.Is
// ErrConditionNotMet, and ErrGlobalConditionNotMet for `<(k)`) and the returned map
// is resource itself, untouched: Kyverno reports such a rule as skipped. Any other
// error is a broken patch (a rule error). Otherwise the result is a new object that
// shares nothing with resource or patch; neither argument is modified.
func StrategicMerge(resource map[string]any, patch any) (map[string]any, error) {
	p, err := patchMap(patch)
	if err != nil {
		return nil, err
	}
	plain, err := preprocess(p, resource)
	if err != nil {
		if _, ok := err.(*ConditionError); ok {
			return resource, err
		}
		return nil, fmt.Errorf("failed to preProcess rule: %w", err)
	}
	return mergePlain(resource, plain)
}

// mergePlain runs kyaml's strategic merge of an anchor-free patch over resource.
//
// kyaml walks every field of both documents, which makes it the cost of a mutation.
// It leaves alone what the patch does not name, so only the part of the resource
// the patch can reach is converted and merged (see prune), and the result is grafted
// back onto a copy of the rest. Each side is converted to a node tree once and the
// result back once; there is no JSON or YAML text round trip.
func mergePlain(resource, patch map[string]any) (map[string]any, error) {
	dest, err := toNode(prune(resource, patch))
	if err != nil {
		return nil, fmt.Errorf("resource: %w", err)
	}
	src, err := toNode(patch)
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	merged, err := merge2.Merge(yaml.NewRNode(src), yaml.NewRNode(dest), yaml.MergeOptions{
		ListIncreaseDirection: yaml.MergeOptionsListPrepend,
	})
	if err != nil {
		return nil, err
	}
	if merged == nil || merged.YNode() == nil {
		return map[string]any{}, nil
	}
	v, err := fromNode(merged.YNode())
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return map[string]any{}, nil
		}
		return nil, fmt.Errorf("strategic merge produced a %T, not an object", v)
	}
	return graft(resource, m, patch), nil
}

// mergeElement merges an anchor-free patch into one list element with kyaml, for
// lists charter edits in place (see preprocessReplacedList).
func mergeElement(elem any, patch map[string]any, s *openapi.ResourceSchema) (any, error) {
	dest, err := toNode(elem)
	if err != nil {
		return nil, err
	}
	src, err := toNode(patch)
	if err != nil {
		return nil, err
	}
	merged, err := walk.Walker{
		Sources:      []*yaml.RNode{yaml.NewRNode(dest), yaml.NewRNode(src)},
		Visitor:      merge2.Merger{},
		Schema:       s,
		MergeOptions: yaml.MergeOptions{ListIncreaseDirection: yaml.MergeOptionsListPrepend},
	}.Walk()
	if err != nil {
		return nil, err
	}
	if merged == nil || merged.YNode() == nil {
		return nil, nil
	}
	return fromNode(merged.YNode())
}

// descends reports whether prune and graft look inside the patch map p rather than
// hand the whole resource value to kyaml: a map without a `$patch` directive (replace
// and delete concern the map as a whole).
func descends(p any, r any) (pm, rm map[string]any, ok bool) {
	pm, ok1 := p.(map[string]any)
	rm, ok2 := r.(map[string]any)
	if !ok1 || !ok2 || len(pm) == 0 {
		return nil, nil, false
	}
	if _, directive := pm["$patch"]; directive {
		return nil, nil, false
	}
	return pm, rm, true
}

// prune returns the part of resource the patch names, descending through maps.
// apiVersion and kind are kept at every level because kyaml picks a schema by them.
func prune(resource, patch map[string]any) map[string]any {
	out := make(map[string]any, len(patch)+2)
	for _, k := range [2]string{"apiVersion", "kind"} {
		if v, ok := resource[k]; ok {
			out[k] = v
		}
	}
	for k, p := range patch {
		r, ok := resource[k]
		if !ok {
			continue
		}
		if pm, rm, ok := descends(p, r); ok {
			out[k] = prune(rm, pm)
			continue
		}
		out[k] = r
	}
	return out
}

// graft returns a deep copy of resource in which the subtrees the patch names are
// those of merged, the result of merging the pruned resource.
func graft(resource, merged, patch map[string]any) map[string]any {
	out := make(map[string]any, len(resource)+len(patch))
	for k, v := range resource {
		if _, named := patch[k]; !named {
			out[k] = copyValue(v)
		}
	}
	for k, p := range patch {
		m, ok := merged[k]
		if !ok {
			continue // deleted by the patch
		}
		if pm, rm, ok := descends(p, resource[k]); ok {
			if mm, isMap := m.(map[string]any); isMap {
				out[k] = graft(rm, mm, pm)
				continue
			}
		}
		out[k] = m
	}
	return out
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = copyValue(x)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = copyValue(x)
		}
		return l
	}
	return normaliseNumber(v)
}

func patchMap(patch any) (map[string]any, error) {
	switch p := patch.(type) {
	case map[string]any:
		return p, nil
	case nil:
		return map[string]any{}, nil
	case string:
		return parsePatchText([]byte(p))
	case []byte:
		return parsePatchText(p)
	}
	return nil, fmt.Errorf("patchStrategicMerge must be an object, got %T", patch)
}

func parsePatchText(b []byte) (map[string]any, error) {
	var m map[string]any
	if err := sigsyaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("patchStrategicMerge: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}
