package convert

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/charter-dev/charter/engine/anchor"
	"github.com/charter-dev/charter/engine/pattern"
	"github.com/charter-dev/charter/engine/wildcard"
)

// outcome is a validate pattern's three-valued result (pass, fail, skip)
// as two CEL conditions: the pattern applies when cond holds (else it
// skips, as an unmet conditional anchor makes it), and then passes when
// check holds. Most patterns cannot skip: their cond is true.
type outcome struct {
	cond, check expr
	// skipPasses says check holds whenever cond does not (a list whose
	// elements all skip passes every element's test), so that "pass or
	// skip" is check alone.
	skipPasses bool
}

// skipping marks o as one whose check holds when it skips, if from does.
func (o outcome) skipping(from outcome) outcome {
	o.skipPasses = from.skipPasses
	return o
}

func (o outcome) pass() expr { return and(o.cond, o.check) }

// passOrSkip holds for every result but fail.
func (o outcome) passOrSkip() expr {
	if o.skipPasses {
		return o.check
	}
	return implies(o.cond, o.check)
}

// then appends a step evaluated after o: the first step that does not
// pass decides, as Kyverno walks a pattern map.
func (o outcome) then(next outcome) outcome {
	switch {
	case o.cond.isTrue() && o.check.isTrue():
		return next
	case next.cond.isTrue():
		return outcome{cond: o.cond, check: and(o.check, next.check)}
	case o.check.isTrue():
		return outcome{cond: and(o.cond, next.cond), check: next.check}
	}
	return outcome{cond: and(o.cond, or(not(o.check), next.cond)), check: and(o.check, next.cond, next.check)}
}

// unconvertible is a reason a construct has no CEL form here.
type unconvertible struct{ reason string }

func (u *unconvertible) Error() string { return u.reason }

func cannot(format string, args ...any) error {
	return &unconvertible{fmt.Sprintf(format, args...)}
}

// patternTranslator turns validate patterns into CEL over an object
// expression.
type patternTranslator struct {
	// present lists paths (from the pattern root, joined by '.') that
	// every matched resource has, so no has() guards them: metadata, and
	// for Pods spec and spec.containers.
	present map[string]bool
	vars    *iterNames
}

// translate converts a pattern applied to v (path p from the root).
func (t *patternTranslator) translate(pat any, v expr, p string) (outcome, error) {
	switch x := pat.(type) {
	case map[string]any:
		return t.mapping(x, v, p)
	case []any:
		return t.array(x, v, p)
	}
	if knownLists[lastSegment(p)] || lastSegment(p) == "supplementalGroups" {
		// A scalar pattern on a list applies to every element.
		x := t.vars.name(lastSegment(p))
		defer t.vars.release(x)
		check, err := scalarCheck(pat, atom(x), p+"[]")
		return outcome{cond: celTrue, check: macro(v, "all", x, check)}, err
	}
	check, err := scalarCheck(pat, v, p)
	return outcome{cond: celTrue, check: check}, err
}

type patternField struct {
	raw, key string
	anchor   anchor.Kind
	value    any
	nested   bool
}

// fieldsInOrder orders a pattern map's keys as charter's engine (and
// Kyverno) walk them: condition, equality, existence and negation anchors
// by key; then global anchors and keys whose subtree holds anchors, in
// reverse key order; then the rest by key.
func fieldsInOrder(m map[string]any) ([]patternField, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var phase1, front, back []patternField
	for _, raw := range keys {
		a, ok := anchor.Parse(raw)
		f := patternField{raw: raw, key: raw, value: m[raw], nested: holdsAnchors(m[raw])}
		if ok {
			if a.Kind == anchor.Add {
				return nil, cannot("add anchor %q belongs to mutate patterns", raw)
			}
			f.anchor, f.key = a.Kind, a.Key
		}
		switch {
		case f.anchor == anchor.Condition || f.anchor == anchor.Equality || f.anchor == anchor.Existence || f.anchor == anchor.Negation:
			phase1 = append(phase1, f)
		case f.anchor == anchor.Global || f.nested:
			front = append(front, f)
		default:
			back = append(back, f)
		}
	}
	slices.Reverse(front)
	return append(append(phase1, front...), back...), nil
}

func holdsAnchors(p any) bool {
	switch v := p.(type) {
	case map[string]any:
		for k, e := range v {
			if kind := anchor.KindOf(k); kind != anchor.None && kind != anchor.Add {
				return true
			}
			if holdsAnchors(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if holdsAnchors(e) {
				return true
			}
		}
	}
	return false
}

func join(p, key string) string {
	if p == "" {
		return key
	}
	return p + "." + key
}

func (t *patternTranslator) mapping(m map[string]any, v expr, p string) (outcome, error) {
	fields, err := fieldsInOrder(m)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{cond: celTrue, check: celTrue}
	for _, f := range fields {
		step, err := t.field(f, v, p)
		if err != nil {
			return outcome{}, err
		}
		out = out.then(step)
	}
	return out, nil
}

func (t *patternTranslator) field(f patternField, v expr, p string) (outcome, error) {
	if wildcard.ContainsWildcard(f.key) {
		return t.wildcardKey(f, v, p)
	}
	cp := join(p, f.key)
	present := has(v, f.key)
	if t.present[cp] || containerIdentity(cp) {
		present = celTrue
	}
	cv := field(v, f.key)
	if f.anchor == anchor.None {
		if s, ok := f.value.(string); ok && s == "*" {
			// A plain key whose pattern is "*" must be present.
			return outcome{cond: celTrue, check: present}, nil
		}
	}
	switch f.anchor {
	case anchor.Negation:
		return outcome{cond: celTrue, check: not(present)}, nil
	case anchor.Existence:
		list, ok := f.value.([]any)
		if !ok || len(list) == 0 {
			return outcome{}, cannot("existence anchor %q needs a list of maps", f.raw)
		}
		var each []expr
		x := t.vars.name(f.key)
		defer t.vars.release(x)
		for _, e := range list {
			if _, isMap := e.(map[string]any); !isMap {
				return outcome{}, cannot("existence anchor %q needs a list of maps", f.raw)
			}
			o, err := t.translate(e, atom(x), cp+"[]")
			if err != nil {
				return outcome{}, err
			}
			each = append(each, macro(cv, "exists", x, o.pass()))
		}
		return outcome{cond: celTrue, check: implies(present, and(each...))}, nil
	}
	child, err := t.translate(f.value, cv, cp)
	if err != nil {
		return outcome{}, err
	}
	switch f.anchor {
	case anchor.Condition:
		return outcome{cond: and(present, child.pass()), check: celTrue}, nil
	case anchor.Global:
		return outcome{cond: implies(present, child.pass()), check: celTrue}, nil
	case anchor.Equality:
		return outcome{cond: implies(present, child.cond), check: implies(present, child.check)}.skipping(child), nil
	}
	// A plain key: when absent, the resource value is null, which a scalar
	// pattern may accept ("<1" does: null counts as 0) and a map or list
	// never does.
	absentPasses := false
	if _, isMap := f.value.(map[string]any); !isMap {
		if _, isList := f.value.([]any); !isList {
			absentPasses = pattern.MatchValue(nil, f.value)
		}
	}
	if present.isTrue() {
		return child, nil
	}
	if absentPasses {
		return outcome{cond: implies(present, child.cond), check: implies(present, child.check)}.skipping(child), nil
	}
	return outcome{cond: implies(present, child.cond), check: and(present, child.check)}.skipping(child), nil
}

// wildcardKey handles a key with * or ? under metadata labels or
// annotations: the first resource key that matches stands for it.
func (t *patternTranslator) wildcardKey(f patternField, v expr, p string) (outcome, error) {
	if !strings.HasSuffix(p, "metadata.labels") && !strings.HasSuffix(p, "metadata.annotations") {
		return outcome{}, cannot("wildcard key %q outside metadata.labels or metadata.annotations", f.raw)
	}
	switch f.anchor {
	case anchor.None, anchor.Equality, anchor.Negation:
	default:
		return outcome{}, cannot("wildcard key %q with an anchor", f.raw)
	}
	if _, isMap := f.value.(map[string]any); isMap {
		return outcome{}, cannot("wildcard key %q with a map value", f.raw)
	}
	child, err := scalarCheck(f.value, atom(v.at(precAtom)+"[key]"), join(p, "*"))
	if err != nil {
		return outcome{}, err
	}
	match := globExpr(atom("key"), f.key)
	switch f.anchor {
	case anchor.Negation:
		return outcome{cond: celTrue, check: not(macro(v, "exists", "key", match))}, nil
	case anchor.Equality:
		// Every key the wildcard matches must hold the value (Kyverno
		// checks the first it finds).
		return outcome{cond: celTrue, check: macro(v, "all", "key", implies(match, child))}, nil
	}
	return outcome{cond: celTrue, check: macro(v, "exists", "key", and(match, child))}, nil
}

func lastSegment(s string) string {
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func (t *patternTranslator) array(list []any, v expr, p string) (outcome, error) {
	if len(list) == 0 {
		return outcome{}, cannot("empty pattern list at %s", p)
	}
	x := t.vars.name(lastSegment(p))
	defer t.vars.release(x)
	switch list[0].(type) {
	case map[string]any:
		e, err := t.translate(list[0], atom(x), p+"[]")
		if err != nil {
			return outcome{}, err
		}
		if e.cond.isTrue() {
			return outcome{cond: celTrue, check: macro(v, "all", x, e.check)}, nil
		}
		// Elements that skip are ignored; when every element skips the
		// list skips.
		applies := macro(v, "exists", x, e.cond)
		if !t.present[p] {
			applies = or(rel(fn("size", v), "==", atom("0")), applies)
		}
		return outcome{cond: applies, check: macro(v, "all", x, e.passOrSkip()), skipPasses: true}, nil
	case []any:
		return outcome{}, cannot("nested pattern lists at %s compare by position", p)
	}
	check, err := scalarCheck(list[0], atom(x), p+"[]")
	if err != nil {
		return outcome{}, err
	}
	return outcome{cond: celTrue, check: macro(v, "all", x, check)}, nil
}

// scalarCheck converts a scalar pattern (validate-semantics.md §3) on the
// present value v.
func scalarCheck(pat any, v expr, p string) (expr, error) {
	switch x := pat.(type) {
	case nil:
		return or(rel(v, "==", atom("null")), rel(v, "==", celFalse), rel(v, "==", atom("0")), rel(v, "==", str(""))), nil
	case bool, float64, int64, int:
		lit, _ := literal(x)
		return rel(v, "==", lit), nil
	case string:
		return stringPattern(x, v, p)
	case nameValue:
		return rel(v, "==", x.e), nil
	case map[string]any:
		return celTrue, nil
	}
	return expr{}, cannot("pattern value %v at %s", pat, p)
}

// nameValue is a pattern value that is a whole variable holding a
// Kubernetes name ("{{ serviceAccountName }}"): Kyverno substitutes it
// before reading the pattern, and a name holds none of the pattern's
// operators or wildcards, so the field must equal it.
type nameValue struct{ e expr }

// nameVariables are the variables whose values are Kubernetes names.
var nameVariables = map[string]bool{
	"serviceAccountName": true, "request.namespace": true,
	"request.object.metadata.name": true, "request.object.metadata.namespace": true,
}

// withNameValues replaces the pattern values that are a whole name
// variable by their CEL; other variables stay, for hasVariables to refuse.
func withNameValues(pat any, scope *jmesScope) (any, error) {
	switch x := pat.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			nv, err := withNameValues(v, scope)
			if err != nil {
				return nil, err
			}
			out[k] = nv
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			nv, err := withNameValues(v, scope)
			if err != nil {
				return nil, err
			}
			out[i] = nv
		}
		return out, nil
	case string:
		if m := wholeVariable.FindStringSubmatch(strings.TrimSpace(x)); m != nil && nameVariables[m[1]] {
			v, err := scope.convert(m[1])
			if err != nil {
				return nil, err
			}
			return nameValue{v.e}, nil
		}
	}
	return pat, nil
}

var rangeRE = regexp.MustCompile(`^([-+]?\d+(?:\.\d+)?[A-Za-z]*)(!?-)([-+]?\d+(?:\.\d+)?[A-Za-z]*)$`)

// stringPattern converts the string grammar: alternatives on '|', each a
// conjunction on '&' of comparisons.
func stringPattern(raw string, v expr, p string) (expr, error) {
	var alts []expr
	for _, alt := range strings.Split(raw, "|") {
		var parts []expr
		for _, part := range strings.Split(strings.Trim(alt, " "), "&") {
			e, err := comparisonExpr(strings.Trim(part, " "), v, p)
			if err != nil {
				return expr{}, err
			}
			parts = append(parts, e)
		}
		alts = append(alts, and(parts...))
	}
	if len(alts) > 1 {
		if lits, ok := plainAlternatives(raw); ok {
			return rel(v, "in", strList(lits)), nil
		}
	}
	return or(alts...), nil
}

// plainAlternatives returns a|b|c's literals when none has an operator or
// wildcard, for a readable "in" list.
func plainAlternatives(raw string) ([]string, bool) {
	var out []string
	for _, alt := range strings.Split(raw, "|") {
		alt = strings.Trim(alt, " ")
		if alt == "" || strings.ContainsAny(alt, "&!<>*?") || rangeRE.MatchString(alt) || looksNumeric(alt) || alt == "true" || alt == "false" {
			return nil, false
		}
		out = append(out, alt)
	}
	return out, true
}

func comparisonExpr(part string, v expr, p string) (expr, error) {
	if len(part) >= 2 {
		for _, op := range []string{">=", "<=", ">", "<"} {
			if strings.HasPrefix(part, op) {
				return ordered(op, strings.TrimSpace(part[len(op):]), v, p)
			}
		}
		if strings.HasPrefix(part, "!") {
			e, err := equality(strings.TrimSpace(part[1:]), v, p)
			return not(e), err
		}
		if m := rangeRE.FindStringSubmatch(part); m != nil {
			if m[2] == "!-" {
				lo, err := ordered("<", m[1], v, p)
				if err != nil {
					return expr{}, err
				}
				hi, err := ordered(">", m[3], v, p)
				return or(lo, hi), err
			}
			lo, err := ordered(">=", m[1], v, p)
			if err != nil {
				return expr{}, err
			}
			hi, err := ordered("<=", m[3], v, p)
			return and(lo, hi), err
		}
	}
	return equality(part, v, p)
}

func looksNumeric(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// underMetadataMap says whether p is a label or annotation value, which is
// always a string.
func underMetadataMap(p string) bool {
	return strings.Contains(p, "metadata.labels.") || strings.Contains(p, "metadata.annotations.") || strings.HasSuffix(p, "metadata.labels.*") || strings.HasSuffix(p, "metadata.annotations.*")
}

func underResources(p string) bool {
	return strings.Contains(p, "resources.") || strings.Contains(p, "quota") || strings.Contains(p, "capacity") || strings.Contains(p, "storage")
}

func equality(operand string, v expr, p string) (expr, error) {
	if !underMetadataMap(p) {
		switch {
		case (operand == "true" || operand == "false") && booleanFields[lastSegment(p)]:
			return rel(v, "==", atom(operand)), nil
		case operand == "true" || operand == "false":
			// The value may be a bool or a string: Kyverno compares
			// their text.
			return rel(fn("string", v), "==", str(operand)), nil
		case looksNumeric(operand) && !underResources(p):
			if n, err := strconv.ParseInt(operand, 10, 64); err == nil {
				return rel(v, "==", atom(strconv.FormatInt(n, 10))), nil
			}
		}
		if _, err := resource.ParseQuantity(operand); err == nil && underResources(p) {
			return fn("quantity", fn("string", v)).withCall("isEqualTo", fn("quantity", str(operand))), nil
		}
	}
	return globExpr(v, operand), nil
}

func (e expr) withCall(method string, args ...expr) expr { return call(e, method, args...) }

// ordered converts >, <, >=, <= against a number, quantity or duration.
func ordered(op, operand string, v expr, p string) (expr, error) {
	if n, err := strconv.ParseInt(operand, 10, 64); err == nil && !underResources(p) {
		return rel(v, op, atom(strconv.FormatInt(n, 10))), nil
	}
	if _, err := resource.ParseQuantity(operand); err == nil && (underResources(p) || !isDuration(operand)) {
		cmp := call(fn("quantity", fn("string", v)), "compareTo", fn("quantity", str(operand)))
		return rel(cmp, op, atom("0")), nil
	}
	if isDuration(operand) {
		return rel(fn("duration", v), op, fn("duration", str(operand))), nil
	}
	return expr{}, cannot("%q compares a non-numeric value by order at %s", op+operand, p)
}

func isDuration(s string) bool {
	if looksNumeric(s) {
		return false
	}
	_, err := time.ParseDuration(s)
	return err == nil
}

// globExpr matches v against a wildcard pattern, as readably as the
// pattern allows.
func globExpr(v expr, pat string) expr {
	if !wildcard.ContainsWildcard(pat) {
		return rel(v, "==", str(pat))
	}
	if pat == "*" {
		return celTrue
	}
	if pat == "?*" {
		return rel(fn("size", v), ">", atom("0"))
	}
	inner := strings.Trim(pat, "*")
	if !strings.ContainsAny(inner, "*?") {
		lead, trail := strings.HasPrefix(pat, "*"), strings.HasSuffix(pat, "*")
		switch {
		case lead && trail:
			return call(v, "contains", str(inner))
		case trail:
			return call(v, "startsWith", str(inner))
		case lead:
			return call(v, "endsWith", str(inner))
		}
	}
	return call(v, "matches", str(globRegexp(pat)))
}

func globRegexp(pat string) string {
	var b strings.Builder
	b.WriteByte('^')
	for _, r := range pat {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteByte('.')
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteByte('$')
	return b.String()
}

// iterNames hands out readable iteration variable names (container,
// volume) that do not shadow one another in nested macros.
type iterNames struct{ inUse map[string]bool }

func (n *iterNames) name(listKey string) string {
	if n.inUse == nil {
		n.inUse = map[string]bool{}
	}
	base := identOnly(singular(listKey))
	name := base
	for i := 2; n.inUse[name] || reservedRoot[name]; i++ {
		name = base + strconv.Itoa(i)
	}
	n.inUse[name] = true
	return name
}

func (n *iterNames) release(name string) { delete(n.inUse, name) }

var reservedRoot = map[string]bool{"object": true, "oldObject": true, "request": true, "variables": true, "namespaceObject": true, "params": true, "key": true, "has": true, "size": true, "exceptions": true, "resource": true, "http": true, "image": true, "images": true}

func singular(key string) string {
	key = strings.TrimSuffix(strings.TrimSuffix(key, "[]"), "]")
	if i := strings.LastIndexAny(key, ".["); i >= 0 {
		key = key[i+1:]
	}
	switch {
	case strings.HasSuffix(strings.ToLower(key), "containers"):
		return "container"
	case strings.HasSuffix(key, "ies"):
		return key[:len(key)-3] + "y"
	case strings.HasSuffix(key, "sses"):
		return key[:len(key)-2]
	case strings.HasSuffix(key, "s") && len(key) > 1:
		return key[:len(key)-1]
	case key == "":
		return "item"
	}
	return key + "Item"
}

// containerIdentity says whether p is a container's name or image, which
// every container has.
func containerIdentity(p string) bool {
	return strings.HasSuffix(p, "ontainers[].image") || strings.HasSuffix(p, "ontainers[].name")
}

// identOnly keeps the identifier characters of s ("item" when none are
// left), so that numbering it always ends in a valid name.
func identOnly(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || b.Len() > 0 && r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 || celReserved[b.String()] {
		return "item"
	}
	return b.String()
}

// booleanFields are Kubernetes fields that hold a bool, which a "true"
// or "false" pattern compares as one.
var booleanFields = map[string]bool{
	"privileged": true, "allowPrivilegeEscalation": true, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
	"hostNetwork": true, "hostPID": true, "hostIPC": true, "hostUsers": true, "automountServiceAccountToken": true,
	"shareProcessNamespace": true, "stdin": true, "tty": true, "readOnly": true, "enableServiceLinks": true,
	"setHostnameAsFQDN": true, "optional": true, "hostProcess": true, "suspend": true,
}
