package convert

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/wildcard"
)

var (
	wholeVariable = regexp.MustCompile(`^\{\{-?\s*(.*?)\s*\}\}$`)
	identifierRE  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	// nestedVariable is a quoted variable inside an expression.
	nestedVariable = regexp.MustCompile(`'\{\{-?\s*(.*?)\s*\}\}'`)
)

// operand converts a condition key or value: a "{{ expr }}" string is the
// expression's value, anything else a literal.
func (s *jmesScope) operand(v any) (jmesValue, error) {
	if str, ok := v.(string); ok {
		// Kyverno substitutes a quoted inner '{{ x }}' first, as the text
		// of x's value: x itself reads the same, from the root even
		// inside a filter ([?name == '{{ element.name }}']).
		written, failed := str, error(nil)
		str = nestedVariable.ReplaceAllStringFunc(str, func(m string) string {
			ref, err := s.rootRef(nestedVariable.FindStringSubmatch(m)[1])
			if err != nil {
				failed = err
			}
			return ref
		})
		if failed != nil {
			return jmesValue{}, failed
		}
		if m := wholeVariable.FindStringSubmatch(strings.TrimSpace(str)); m != nil && !strings.Contains(m[1], "{{") {
			if shared, ok := s.shared[m[1]]; ok {
				return shared, nil
			}
			src := m[1]
			if w := wholeVariable.FindStringSubmatch(strings.TrimSpace(written)); w != nil {
				src = w[1]
			}
			return s.convertAt(src, m[1], nil)
		}
		if strings.Contains(str, "{{") {
			return jmesValue{}, cannot("variable inside the string %q", written)
		}
	}
	return literalValue(v)
}

// conditions converts {any, all} blocks: true when the conditions hold.
func (s *jmesScope) conditions(c *kyvernov1.AnyAllConditions) (expr, error) {
	if c == nil {
		return celTrue, nil
	}
	var anyOf, allOf []expr
	for _, cond := range c.AnyConditions {
		e, err := s.condition(cond)
		if err != nil {
			return expr{}, err
		}
		anyOf = append(anyOf, e)
	}
	for _, cond := range c.AllConditions {
		e, err := s.condition(cond)
		if err != nil {
			return expr{}, err
		}
		allOf = append(allOf, e)
	}
	anyExpr := celTrue
	if len(anyOf) > 0 {
		anyExpr = or(anyOf...)
	}
	return and(anyExpr, and(allOf...)), nil
}

func (s *jmesScope) rawConditions(raw any) (expr, error) {
	if raw == nil {
		return celTrue, nil
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return expr{}, err
	}
	var c kyvernov1.AnyAllConditions
	if list, ok := raw.([]any); ok {
		data, _ = json.Marshal(map[string]any{"all": list})
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return expr{}, cannot("conditions: %v", err)
	}
	return s.conditions(&c)
}

func (s *jmesScope) condition(c kyvernov1.Condition) (expr, error) {
	rawKey, err := c.Key()
	if err != nil {
		return expr{}, err
	}
	rawValue, err := c.Value()
	if err != nil {
		return expr{}, err
	}
	key, err := s.operand(rawKey)
	if err != nil {
		return expr{}, err
	}
	if key.e.s == "request.operation" {
		if e, known := s.operationCondition(c.Operator, rawValue); known {
			return e, nil
		}
	}
	value, err := s.operand(rawValue)
	if err != nil {
		return expr{}, err
	}
	if key.fallback != nil {
		// "request.operation || 'BACKGROUND'": the default only shows in
		// a background scan, where the field is empty; when the value
		// names neither, both read the same and the field alone will do.
		for _, v := range literalStrings(value) {
			if v == "" || v == *key.fallback {
				return expr{}, cannot("condition on the default %q of a request field", *key.fallback)
			}
		}
		if !value.hasLit {
			return expr{}, cannot("condition on the default %q of a request field", *key.fallback)
		}
	}
	op := strings.ToLower(string(c.Operator))
	if (op == "equals" || op == "equal" || op == "notequals" || op == "notequal") && !value.hasLit && s.readsCluster(value.e) {
		return expr{}, cannot("%s a value read from the cluster: Kyverno matches it as a wildcard pattern and across types, CEL's == does not", c.Operator)
	}
	switch op {
	case "equals", "equal":
		return equalsExpr(key, value)
	case "notequals", "notequal":
		e, err := equalsExpr(key, value)
		return not(e), err
	case "anyin", "in":
		return membership(key, value, "exists", false)
	case "allin":
		return membership(key, value, "all", false)
	case "anynotin", "notin":
		return membership(key, value, "exists", true)
	case "allnotin":
		return membership(key, value, "all", true)
	case "greaterthan", "durationgreaterthan":
		return orderExpr(key, value, ">")
	case "greaterthanorequals", "durationgreaterthanorequals":
		return orderExpr(key, value, ">=")
	case "lessthan", "durationlessthan":
		return orderExpr(key, value, "<")
	case "lessthanorequals", "durationlessthanorequals":
		return orderExpr(key, value, "<=")
	}
	return expr{}, cannot("operator %q", c.Operator)
}

// equalsExpr: Equals compares by wildcard when the value is a string
// pattern, by quantity or duration when both sides read as one.
func equalsExpr(key, value jmesValue) (expr, error) {
	if ks, ok := key.lit.(string); ok && key.hasLit && value.hasLit {
		// Both literal: fold.
		if vs, ok := value.lit.(string); ok {
			return boolExpr(wildcard.Match(vs, ks)), nil
		}
	}
	if vs, ok := value.lit.(string); ok && value.hasLit {
		if isDuration(vs) || (looksQuantity(vs) && !looksNumeric(vs)) {
			return expr{}, cannot("Equals with the quantity or duration %q", vs)
		}
		return globExpr(key.e, vs), nil
	}
	if value.hasLit {
		if _, isMap := value.lit.(map[string]any); isMap {
			return expr{}, cannot("Equals with a map value")
		}
	}
	return rel(key.e, "==", value.e), nil
}

func boolExpr(b bool) expr {
	if b {
		return celTrue
	}
	return celFalse
}

func looksQuantity(s string) bool {
	_, err := resource.ParseQuantity(s)
	return err == nil
}

// membership converts AnyIn, AllIn, AnyNotIn and AllNotIn. Kyverno
// matches wildcards in both directions; the converter handles a value
// list with wildcards (the usual case) and refuses ranges.
func membership(key, value jmesValue, quantifier string, negate bool) (expr, error) {
	var items []string
	var others []expr
	switch lit := value.lit.(type) {
	case []any:
		for _, it := range lit {
			if s, ok := it.(string); ok {
				items = append(items, s)
				continue
			}
			v, ok := literal(it)
			if !ok {
				return expr{}, cannot("a list value holding %v", it)
			}
			others = append(others, v)
		}
	case string:
		if strings.HasPrefix(strings.TrimSpace(lit), "[") {
			var list []string
			if err := json.Unmarshal([]byte(lit), &list); err != nil {
				return expr{}, cannot("value %q", lit)
			}
			items = list
		} else {
			if m := rangeRE.FindStringSubmatch(lit); m != nil {
				if !looksNumeric(m[1]) || !looksNumeric(m[3]) {
					return expr{}, cannot("range value %q", lit)
				}
				inRange := func(x expr) expr {
					r := and(rel(x, ">=", atom(m[1])), rel(x, "<=", atom(m[3])))
					if m[2] == "!-" {
						return not(r)
					}
					return r
				}
				return quantify(key, quantifier, negate, inRange), nil
			}
			items = []string{lit}
		}
	}
	if !value.hasLit {
		if !value.list {
			return expr{}, cannot("membership in a value that may be a string or a list")
		}
	}
	member := func(x expr) expr {
		if !value.hasLit {
			return rel(x, "in", value.e)
		}
		var alts []expr
		if len(items) > 0 {
			alts = append(alts, anyGlob(x, items))
		}
		for _, o := range others {
			alts = append(alts, rel(x, "==", o))
		}
		return or(alts...)
	}
	return quantify(key, quantifier, negate, member), nil
}

// quantify applies a membership test to a key: to the key itself when it
// is a scalar, else to any (exists) or every (all) element.
func quantify(key jmesValue, quantifier string, negate bool, member func(expr) expr) expr {
	if !key.list {
		if negate {
			return not(member(key.e))
		}
		return member(key.e)
	}
	x := "item"
	body := member(atom(x))
	if name := fieldName(key.e.s); name == "verbs" || name == "resources" || name == "apiGroups" {
		// Kyverno matches wildcards both ways: an RBAC rule's "*" is in
		// every list.
		body = or(rel(atom(x), "==", str("*")), body)
	}
	if negate {
		body = not(body)
	}
	return macro(key.e, quantifier, x, body)
}

func orderExpr(key, value jmesValue, op string) (expr, error) {
	if vs, ok := value.lit.(string); ok && value.hasLit {
		switch {
		case looksNumeric(vs):
			return rel(key.e, op, atom(vs)), nil
		case isDuration(vs):
			return rel(fn("duration", key.e), op, fn("duration", str(vs))), nil
		case looksQuantity(vs):
			return rel(call(fn("quantity", key.e), "compareTo", fn("quantity", str(vs))), op, atom("0")), nil
		}
		return expr{}, cannot("ordering against %q", vs)
	}
	return rel(key.e, op, value.e), nil
}

// literalStrings lists the strings a literal value holds.
func literalStrings(v jmesValue) []string {
	switch lit := v.lit.(type) {
	case string:
		return []string{lit}
	case []any:
		var out []string
		for _, e := range lit {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// fieldName is the last field an expression reads: apiGroups for
// rule.?apiGroups.orValue([]).
func fieldName(e string) string {
	if i := strings.LastIndex(e, ".orValue("); i >= 0 && strings.HasSuffix(e, ")") {
		e = e[:i]
	}
	return strings.TrimPrefix(lastSegment(e), "?")
}

// shareRepeatedKeys binds each JMESPath that two or more conditions read,
// and that converts to more than a field path, to a CEL variable named
// after its last field, so the validation reads variables.hostPorts
// rather than the same projection twice. Only the element-free paths of
// validations qualify: matchConditions cannot read variables.
func (s *jmesScope) shareRepeatedKeys(raw any, out *convertedRule) {
	counts := map[string]int{}
	var order []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if k, ok := x["key"].(string); ok {
				if m := wholeVariable.FindStringSubmatch(strings.TrimSpace(k)); m != nil {
					if counts[m[1]] == 0 {
						order = append(order, m[1])
					}
					counts[m[1]]++
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(raw)
	for _, src := range order {
		if counts[src] < 2 || strings.Contains(src, "element") {
			continue
		}
		jv, err := s.convert(src)
		if err != nil || !strings.Contains(jv.e.s, "(") {
			continue
		}
		name := identOnly(lastField(src))
		for taken := true; taken; {
			taken = false
			for _, v := range out.variables {
				if v.Name == name {
					name, taken = name+"2", true
				}
			}
		}
		out.variables = append(out.variables, admissionregistrationv1.Variable{Name: name, Expression: jv.e.s})
		if s.shared == nil {
			s.shared = map[string]jmesValue{}
		}
		jv.e = atom("variables." + name)
		s.shared[src] = jv
	}
}

// lastField is the last plain field name of a JMESPath expression:
// hostPort for spec.containers[].ports[].hostPort.
func lastField(src string) string {
	fields := identifierRE.FindAllString(src, -1)
	for i := len(fields) - 1; i >= 0; i-- {
		switch fields[i] {
		case "length", "request", "object", "keys", "to_upper", "to_lower":
			continue
		}
		return fields[i]
	}
	return "value"
}

// operationCondition decides a condition on request.operation when it
// holds, or fails, for every operation the policy matches (its
// matchConstraints): "request.operation NotEquals DELETE" under
// operations CREATE and UPDATE says nothing, and is left out.
func (s *jmesScope) operationCondition(op kyvernov1.ConditionOperator, value any) (expr, bool) {
	if len(s.operations) == 0 {
		return expr{}, false
	}
	var values []string
	switch v := value.(type) {
	case string:
		values = []string{v}
	case []any:
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				return expr{}, false
			}
			values = append(values, str)
		}
	default:
		return expr{}, false
	}
	for _, v := range values {
		if wildcard.ContainsWildcard(v) {
			return expr{}, false
		}
	}
	holds := func(operation string) (bool, bool) {
		in := slices.Contains(values, operation)
		switch strings.ToLower(string(op)) {
		case "equals", "equal", "anyin", "allin", "in":
			return in, true
		case "notequals", "notequal", "anynotin", "allnotin", "notin":
			return !in, true
		}
		return false, false
	}
	first, ok := holds(s.operations[0])
	if !ok {
		return expr{}, false
	}
	for _, o := range s.operations[1:] {
		if h, _ := holds(o); h != first {
			return expr{}, false
		}
	}
	return boolExpr(first), true
}
