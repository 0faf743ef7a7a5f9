package convert

import (
	"encoding/json"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/anchor"
)

// convertMutation turns patchStrategicMerge overlays into
// ApplyConfiguration mutations (an Object{...} literal that server-side
// apply merges, as a strategic merge patch merges) and patchesJson6902
// into JSONPatch mutations.
func convertMutation(m *kyvernov1.Mutation, scope *jmesScope, present map[string]bool) ([]admissionregistrationv1.Mutation, error) {
	var out []admissionregistrationv1.Mutation
	if m.RawPatchStrategicMerge != nil {
		patch, err := kyvernov1.FromJSON(m.RawPatchStrategicMerge)
		if err != nil {
			return nil, err
		}
		mus, err := overlayMutations(patch, scope, present)
		if err != nil {
			return nil, wrap(err, "patchStrategicMerge")
		}
		out = append(out, mus...)
	}
	if m.PatchesJSON6902 != "" {
		mu, err := jsonPatch(m.PatchesJSON6902, scope)
		if err != nil {
			return nil, wrap(err, "patchesJson6902")
		}
		out = append(out, mu)
	}
	for i, fe := range m.ForEachMutation {
		mu, err := foreachMutation(fe, scope, present)
		if err != nil {
			return nil, wrap(err, "foreach entry %d", i)
		}
		out = append(out, mu)
	}
	if len(out) == 0 {
		return nil, cannot("mutate has no patchStrategicMerge, patchesJson6902 or foreach")
	}
	return out, nil
}

// perElement is a foreach over a list whose overlay patches the element
// of that list it names ((name): "{{ element.name }}").
type perElement struct {
	// path is the list's path from the object ("spec.containers").
	path string
	// list is the CEL list iterated, x its variable.
	list expr
	x    string
}

func applyConfiguration(patch any, scope *jmesScope, present map[string]bool, each *perElement) (admissionregistrationv1.Mutation, error) {
	root, ok := patch.(map[string]any)
	if !ok {
		return admissionregistrationv1.Mutation{}, cannot("the overlay is not a map")
	}
	ov := &overlay{scope: scope, present: present, each: each}
	body, cond, err := ov.object(root, atom("object"), "Object", "")
	if err != nil {
		return admissionregistrationv1.Mutation{}, err
	}
	if len(ov.patches) > 0 {
		return admissionregistrationv1.Mutation{}, cannot("a field server-side apply replaces whole, in a foreach")
	}
	return applyMutation(body, cond), nil
}

func applyMutation(body, cond expr) admissionregistrationv1.Mutation {
	e := body
	if !cond.isTrue() {
		e = ternary(cond, body, atom("Object{}"))
	}
	return admissionregistrationv1.Mutation{
		PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: formatObjects(e.s)},
	}
}

// overlayMutations converts a patchStrategicMerge overlay: an
// ApplyConfiguration for what server-side apply merges as the overlay
// does, then a JSONPatch for the fields it replaces whole (atomic maps and
// lists), which an ApplyConfiguration may not set.
func overlayMutations(patch any, scope *jmesScope, present map[string]bool) ([]admissionregistrationv1.Mutation, error) {
	root, ok := patch.(map[string]any)
	if !ok {
		return nil, cannot("the overlay is not a map")
	}
	ov := &overlay{scope: scope, present: present, atomicPatches: true}
	body, cond, err := ov.object(root, atom("object"), "Object", "")
	if err != nil {
		return nil, err
	}
	var out []admissionregistrationv1.Mutation
	if body.s != "Object{}" {
		out = append(out, applyMutation(body, cond))
	}
	if len(ov.patches) > 0 {
		// One operation list a line.
		ops := concat(ov.patches, " +\n")
		if !cond.isTrue() {
			ops = ternary(cond, ops, atom("[]"))
		}
		out = append(out, admissionregistrationv1.Mutation{
			PatchType: admissionregistrationv1.PatchTypeJSONPatch,
			JSONPatch: &admissionregistrationv1.JSONPatch{Expression: ops.s},
		})
	}
	return out, nil
}

// overlay translates a strategic merge overlay.
type overlay struct {
	scope   *jmesScope
	present map[string]bool
	each    *perElement
	// atomicPatches lets fields server-side apply replaces whole become
	// JSONPatch operations (patches, CEL lists to concatenate) where the
	// overlay replaces them too (replacedLists) or sets keys of a map
	// (atomicMaps); under a +(key) anchor or a list they are refused.
	atomicPatches bool
	patches       []expr
	underAdd      int
}

// replacedLists are atomic lists without a merge key: the overlay
// replaces them whole, as a JSONPatch add does.
var replacedLists = map[string]bool{
	"drop": true, "add": true, "options": true, "nameservers": true, "searches": true, "args": true,
	"command": true, "envFrom": true, "tolerations": true, "preferredDuringSchedulingIgnoredDuringExecution": true,
}

// atomicMaps are maps server-side apply replaces whole; the overlay sets
// its keys, as one JSONPatch add per key does.
var atomicMaps = map[string]bool{"nodeSelector": true, "matchLabels": true}

// stringMaps are fields whose values are maps of strings, written as CEL
// map literals rather than typed objects.
var stringMaps = map[string]bool{"labels": true, "annotations": true, "data": true, "stringData": true, "requests": true, "limits": true}

// atomicFields are fields server-side apply replaces whole (atomic lists,
// maps and structs), which an ApplyConfiguration may not set: overlays
// that write them need a JSONPatch, which the converter does not write
// from an overlay.
var atomicFields = map[string]bool{
	"nodeSelector": true, "drop": true, "add": true, "options": true, "envFrom": true, "labelSelector": true,
	"matchLabels": true, "matchExpressions": true, "preferredDuringSchedulingIgnoredDuringExecution": true,
	"requiredDuringSchedulingIgnoredDuringExecution": true, "tolerations": true, "nameservers": true,
	"searches": true, "args": true, "command": true, "finalizers": true, "topologySpreadConstraints": true,
	"imagePullSecrets": true,
}

// object renders a map overlay applied to the object at v as a typed
// literal (Object.spec{...}); cond is what its conditional anchors
// require of the resource.
func (o *overlay) object(m map[string]any, v expr, typ, p string) (expr, expr, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var fields []string
	cond := celTrue
	for _, raw := range keys {
		val := m[raw]
		a, anchored := anchor.Parse(raw)
		key := raw
		if anchored {
			key = a.Key
		}
		cp := join(p, key)
		cv := field(v, key)
		present := has(v, key)
		if o.present[cp] || containerIdentity(cp) {
			present = celTrue
		}
		switch {
		case anchored && a.Kind == anchor.Condition:
			if hasVariables(val) {
				return expr{}, expr{}, cannot("conditional anchor %q with a variable", raw)
			}
			pt := &patternTranslator{present: o.present, vars: o.scope.vars}
			out, err := pt.translate(val, cv, cp)
			if err != nil {
				return expr{}, expr{}, err
			}
			cond = and(cond, present, out.pass())
			continue
		case anchored && a.Kind != anchor.Add:
			return expr{}, expr{}, cannot("%s anchor %q in an overlay", a.Kind, raw)
		}
		if !isIdent(key) {
			return expr{}, expr{}, cannot("field %q is not a CEL identifier", key)
		}
		if atomicFields[key] {
			ops, err := o.atomicPatch(val, v, key, cp, anchored)
			if err != nil {
				return expr{}, expr{}, err
			}
			o.patches = append(o.patches, ops...)
			continue
		}
		if anchored {
			o.underAdd++
		}
		value, vcond, err := o.value(val, cv, typ+"."+key, cp)
		if anchored {
			o.underAdd--
		}
		if err != nil {
			return expr{}, expr{}, err
		}
		if !vcond.isTrue() {
			return expr{}, expr{}, cannot("conditional anchor below %s outside a list", cp)
		}
		if value.s == typ+"."+key+"{}" {
			// Only fields written as JSONPatch below: nothing to apply.
			continue
		}
		if anchored { // +(key): only when the resource has none.
			fields = append(fields, "?"+key+": "+ternary(and(o.presentChain(v), present), atom("optional.none()"), fn("optional.of", value)).s)
			continue
		}
		if _, isList := val.([]any); isList && strings.HasPrefix(value.s, cv.s+".") && !present.isTrue() {
			// A list patched element by element: nothing when the
			// resource has none.
			fields = append(fields, "?"+key+": "+ternary(and(o.presentChain(v), present), fn("optional.of", value), atom("optional.none()")).s)
			continue
		}
		fields = append(fields, key+": "+value.s)
	}
	return atom(typ + "{" + strings.Join(fields, ", ") + "}"), cond, nil
}

// presentChain is the has() test of v itself (every step below object),
// so that a has() below it does not fail on a missing parent.
func (o *overlay) presentChain(v expr) expr {
	parts := strings.Split(v.s, ".")
	if len(parts) < 2 || strings.ContainsAny(v.s, "()[]?'") {
		return celTrue
	}
	var tests []expr
	base := atom(parts[0])
	path := ""
	for _, part := range parts[1:] {
		path = join(path, part)
		if parts[0] != "object" || !o.present[path] {
			tests = append(tests, has(base, part))
		}
		base = field(base, part)
	}
	return and(tests...)
}

func (o *overlay) value(val any, v expr, typ, p string) (expr, expr, error) {
	key := lastSegment(p)
	switch x := val.(type) {
	case map[string]any:
		if stringMaps[key] {
			return o.stringMap(x, v)
		}
		return o.object(x, v, typ, p)
	case []any:
		return o.list(x, v, typ, p)
	case string:
		if strings.Contains(x, "{{") {
			jv, err := o.scope.operand(x)
			if err != nil {
				return expr{}, expr{}, err
			}
			return jv.e, celTrue, nil
		}
	}
	lit, ok := literal(val)
	if !ok {
		return expr{}, expr{}, cannot("value %v at %s", val, p)
	}
	return lit, celTrue, nil
}

// stringMap renders labels, annotations and other string maps as a CEL
// map literal; +(key) entries are optional entries.
func (o *overlay) stringMap(m map[string]any, v expr) (expr, expr, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var entries []string
	for _, raw := range keys {
		a, anchored := anchor.Parse(raw)
		key := raw
		if anchored {
			if a.Kind != anchor.Add {
				return expr{}, expr{}, cannot("%s anchor %q in a string map", a.Kind, raw)
			}
			key = a.Key
		}
		value, _, err := o.value(m[raw], field(v, key), "", key)
		if err != nil {
			return expr{}, expr{}, err
		}
		if s, ok := m[raw].(string); ok && strings.Contains(s, "{{") {
			// A variable's type is dyn; the map holds strings.
			if jv, err := o.scope.operand(s); err == nil && !jv.str {
				value = fn("string", value)
			}
		}
		if anchored {
			absent := not(and(o.presentChain(v), has(v, key)))
			entries = append(entries, "?"+str(key).s+": "+ternary(absent, fn("optional.of", value), atom("optional.none()")).s)
			continue
		}
		entries = append(entries, str(key).s+": "+value.s)
	}
	return atom("{" + strings.Join(entries, ", ") + "}"), celTrue, nil
}

// list renders a list overlay. Elements with conditional anchors patch
// every resource element that meets them (merged by name); plain elements
// are written as they are (merged by name, or replacing an atomic list).
func (o *overlay) list(items []any, v expr, typ, p string) (expr, expr, error) {
	if o.each != nil && o.each.path == p {
		return o.perElementList(items, typ, p)
	}
	var parts []string
	for _, it := range items {
		m, isMap := it.(map[string]any)
		if isMap && holdsConditions(m) {
			if len(items) != 1 {
				return expr{}, expr{}, cannot("a conditional list element with others at %s", p)
			}
			x := o.scope.vars.name(key(p))
			defer o.scope.vars.release(x)
			body, cond, err := o.object(m, atom(x), typ, p+"[]")
			if err != nil {
				return expr{}, expr{}, err
			}
			if _, named := m["name"]; !named {
				if !strings.HasSuffix(p, "ontainers") && !strings.HasSuffix(p, "volumes") && !strings.HasSuffix(p, "env") {
					return expr{}, expr{}, cannot("list %s has no merge key the converter knows", p)
				}
				body = addNameKey(body, x)
			}
			list := macro(macro(v, "filter", x, cond), "map", x, body)
			return list, celTrue, nil
		}
		e, cond, err := o.value(it, atom("_"), typ, p+"[]")
		if err != nil {
			return expr{}, expr{}, err
		}
		if !cond.isTrue() {
			return expr{}, expr{}, cannot("conditional anchor in %s", p)
		}
		parts = append(parts, e.s)
	}
	return atom("[" + strings.Join(parts, ", ") + "]"), celTrue, nil
}

// perElementList renders the list a foreach patches element by element:
// the element's (name) condition names the element itself.
func (o *overlay) perElementList(items []any, typ, p string) (expr, expr, error) {
	if len(items) != 1 {
		return expr{}, expr{}, cannot("foreach overlay list %s with other than one element", p)
	}
	m, ok := items[0].(map[string]any)
	if !ok {
		return expr{}, expr{}, cannot("foreach overlay list %s of non-maps", p)
	}
	rest := map[string]any{}
	for k, v := range m {
		if k == "(name)" {
			continue
		}
		rest[k] = v
	}
	x := o.each.x
	saved := o.each
	o.each = nil
	body, cond, err := o.object(rest, atom(x), typ, p+"[]")
	o.each = saved
	if err != nil {
		return expr{}, expr{}, err
	}
	if !cond.isTrue() {
		return expr{}, expr{}, cannot("conditional anchors besides (name) in foreach overlay %s", p)
	}
	return macro(o.each.list, "map", x, addNameKey(body, x)), celTrue, nil
}

// addNameKey puts name: x.name first in a typed literal, the key server
// side apply merges containers, volumes and env by.
func addNameKey(body expr, x string) expr {
	i := strings.IndexByte(body.s, '{')
	inner := body.s[i+1 : len(body.s)-1]
	sep := ""
	if inner != "" {
		sep = ", "
	}
	return atom(body.s[:i+1] + "name: " + x + ".name" + sep + inner + "}")
}

func key(p string) string { return strings.TrimSuffix(lastSegment(p), "[]") }

func holdsConditions(m map[string]any) bool {
	for k := range m {
		if anchor.KindOf(k) == anchor.Condition {
			return true
		}
	}
	return false
}

// foreachMutation converts a foreach whose overlay patches the element it
// iterates ((name): "{{ element.name }}" in the list at the foreach list's
// path).
func foreachMutation(fe kyvernov1.ForEachMutation, scope *jmesScope, present map[string]bool) (admissionregistrationv1.Mutation, error) {
	if len(fe.Context) > 0 || fe.AnyAllConditions != nil || fe.PatchesJSON6902 != "" || fe.RawPatchStrategicMerge == nil {
		return admissionregistrationv1.Mutation{}, cannot("only a patchStrategicMerge per element, without context or preconditions, converts")
	}
	src := strings.TrimSpace(fe.List)
	src = strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(src, "|| `[]`")), "[]")
	if !strings.HasPrefix(src, "request.object.") {
		return admissionregistrationv1.Mutation{}, cannot("list %q is not a path of the object", fe.List)
	}
	path := strings.TrimPrefix(src, "request.object.")
	for _, seg := range strings.Split(path, ".") {
		if !isIdent(seg) {
			return admissionregistrationv1.Mutation{}, cannot("list %q is not a path of the object", fe.List)
		}
	}
	patch, err := kyvernov1.FromJSON(fe.RawPatchStrategicMerge)
	if err != nil {
		return admissionregistrationv1.Mutation{}, err
	}
	b, _ := json.Marshal(patch)
	if !strings.Contains(string(b), `"(name)":"{{ element.name }}"`) && !strings.Contains(string(b), `"(name)":"{{element.name}}"`) {
		return admissionregistrationv1.Mutation{}, cannot("the overlay does not patch the element by (name): {{ element.name }}")
	}
	x := scope.vars.name(path)
	defer scope.vars.release(x)
	list, err := scope.convert(src)
	if err != nil {
		return admissionregistrationv1.Mutation{}, err
	}
	inner := &jmesScope{element: x, variables: scope.variables, vars: scope.vars, cluster: scope.cluster, lists: scope.lists}
	mu, err := applyConfiguration(patch, inner, present, &perElement{path: path, list: list.e, x: x})
	if err != nil {
		return mu, err
	}
	return mu, nil
}

// jsonPatch converts RFC 6902 patches with literal values into a JSONPatch
// mutation.
func jsonPatch(src string, scope *jmesScope) (admissionregistrationv1.Mutation, error) {
	var ops []map[string]any
	if err := yaml.Unmarshal([]byte(src), &ops); err != nil {
		return admissionregistrationv1.Mutation{}, cannot("patches: %v", err)
	}
	var parts []string
	for i, op := range ops {
		// Kyverno creates a missing parent on add and ignores a missing
		// path on remove; CEL's JSONPatch fails on both.
		if path, _ := op["path"].(string); strings.HasSuffix(path, "/-") || op["op"] == "remove" {
			return admissionregistrationv1.Mutation{}, cannot("patch %d (%v %s) fails in a JSONPatch where the path is missing", i, op["op"], path)
		}
		var fields []string
		for _, k := range []string{"op", "path", "from", "value"} {
			v, ok := op[k]
			if !ok {
				continue
			}
			if s, isStr := v.(string); isStr && strings.Contains(s, "{{") {
				jv, err := scope.operand(s)
				if err != nil {
					return admissionregistrationv1.Mutation{}, wrap(err, "patch %d", i)
				}
				fields = append(fields, k+": "+jv.e.s)
				continue
			}
			lit, err := celValue(v)
			if err != nil {
				return admissionregistrationv1.Mutation{}, wrap(err, "patch %d", i)
			}
			fields = append(fields, k+": "+lit.s)
		}
		parts = append(parts, "JSONPatch{"+strings.Join(fields, ", ")+"}")
	}
	return admissionregistrationv1.Mutation{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: "[" + strings.Join(parts, ", ") + "]"},
	}, nil
}

// celValue renders any decoded JSON value as a CEL literal.
func celValue(v any) (expr, error) {
	return renderValue(v, func(members []string, _ []any) []string { return members }, func(s string) (expr, error) {
		lit, _ := literal(s)
		return lit, nil
	})
}

// formatObjects lays out typed object literals (Object.spec{a: 1, b: 2})
// one field a line, indented by nesting, as a person writes an
// ApplyConfiguration.
func formatObjects(s string) string {
	return formatBraces(s, isIdentByte)
}

// formatBraces breaks the braces whose preceding byte opens passes: one
// entry a line, indented by nesting.
func formatBraces(s string, opens func(prev byte) bool) string {
	var b strings.Builder
	var stack []bool // per open bracket: is it an object literal's brace
	depth := 0
	inQuote := byte(0)
	indent := func() { b.WriteString("\n" + strings.Repeat("  ", depth)) }
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inQuote != 0 {
			b.WriteByte(c)
			if c == '\\' && i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			} else if c == inQuote {
				inQuote = 0
			}
			continue
		}
		switch {
		case c == '\'' || c == '"':
			inQuote = c
			b.WriteByte(c)
		case c == '{' && (i == 0 || opens(s[i-1])) && i+1 < len(s) && s[i+1] != '}':
			stack = append(stack, true)
			depth++
			b.WriteByte(c)
			indent()
		case c == '{' || c == '(' || c == '[':
			stack = append(stack, false)
			b.WriteByte(c)
		case c == '}' || c == ')' || c == ']':
			if n := len(stack); n > 0 {
				if stack[n-1] {
					depth--
					indent()
				}
				stack = stack[:n-1]
			}
			b.WriteByte(c)
		case c == ',' && len(stack) > 0 && stack[len(stack)-1] && i+1 < len(s) && s[i+1] == ' ':
			b.WriteByte(c)
			indent()
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// atomicPatch writes an overlay's field that server-side apply replaces
// whole as JSONPatch operations: the missing parents created, then the
// list replaced or the map's keys set. +(key) adds the field only when the
// resource has none.
func (o *overlay) atomicPatch(val any, parent expr, key, p string, anchored bool) ([]expr, error) {
	_, isList := val.([]any)
	m, isMap := val.(map[string]any)
	switch {
	case !o.atomicPatches || o.underAdd > 0 || strings.Contains(p, "[]"):
		return nil, cannot("%s is replaced whole by server-side apply: an ApplyConfiguration may not set it", p)
	case isList && !replacedLists[key], isMap && !atomicMaps[key], !isList && !isMap:
		return nil, cannot("%s is replaced whole by server-side apply, and the overlay merges it", p)
	case holdsAnchors(val):
		return nil, cannot("anchors below %s, which server-side apply replaces whole", p)
	}
	pointer := "/" + strings.ReplaceAll(p, ".", "/")
	var ops []expr
	// The parents the resource may lack, outermost first.
	parts := strings.Split(p, ".")
	base, at := atom("object"), ""
	for _, part := range parts[:len(parts)-1] {
		at = join(at, part)
		if !o.present[at] {
			ops = append(ops, ternary(o.presentChain(field(base, part)), atom("[]"), atom("[JSONPatch{op: 'add', path: "+str("/"+strings.ReplaceAll(at, ".", "/")).s+", value: {}}]")))
		}
		base = field(base, part)
	}
	add := func(path string, v any) (string, error) {
		value, err := templateValue(v, o.scope)
		if err != nil {
			return "", err
		}
		return "JSONPatch{op: 'add', path: " + str(path).s + ", value: " + value.s + "}", nil
	}
	var adds []string
	if isList {
		op, err := add(pointer, val)
		if err != nil {
			return nil, err
		}
		adds = append(adds, op)
	} else {
		if !o.present[p] {
			ops = append(ops, ternary(o.presentChain(field(parent, key)), atom("[]"), atom("[JSONPatch{op: 'add', path: "+str(pointer).s+", value: {}}]")))
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			escaped := strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			op, err := add(pointer+"/"+escaped, m[k])
			if err != nil {
				return nil, err
			}
			adds = append(adds, op)
		}
	}
	ops = append(ops, atom("["+strings.Join(adds, ", ")+"]"))
	if anchored {
		return []expr{ternary(and(o.presentChain(parent), has(parent, key)), atom("[]"), concat(ops, " + "))}, nil
	}
	return ops, nil
}

// concat joins lists with +, each parenthesised where it needs.
func concat(lists []expr, sep string) expr {
	parts := make([]string, len(lists))
	for i, l := range lists {
		parts[i] = l.at(precAdd + 1)
	}
	return expr{strings.Join(parts, sep), precAdd}
}
