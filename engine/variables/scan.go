package variables

import (
	"regexp"
	"strings"
)

var (
	// variablePattern matches {{ ... }} not preceded by a backslash. The body
	// may hold single-level braces (JMESPath multi-select hashes, {a: b}) but
	// not another "{{", so the innermost of nested variables matches first.
	// Group 2 is the variable with its braces.
	variablePattern = regexp.MustCompile(`(^|[^\\])(\{\{(?:\{[^{}]*\}|[^{}])*\}\})`)
	// escapedVariablePattern matches \{{ ... }}.
	escapedVariablePattern = regexp.MustCompile(`\\\{\{(?:\{[^{}]*\}|[^{}])*\}\}`)
	// referencePattern matches $(...) not preceded by a backslash: the
	// reference runs to the last ')' before a space. Group 2 is the reference.
	referencePattern = regexp.MustCompile(`(^|[^\\])(\$\([^ ]+\))`)
	// escapedReferencePattern matches \$(...).
	escapedReferencePattern = regexp.MustCompile(`\\\$\([^ ]+\)`)
)

// Every variable (or escaped variable) contains variableMarker, and every
// reference contains referenceMarker.
const (
	variableMarker  = "{{"
	referenceMarker = "$("
)

// hasMarker reports whether any string or map key in doc contains marker.
// It does not allocate.
func hasMarker(doc any, marker string) bool {
	switch t := doc.(type) {
	case string:
		return strings.Contains(t, marker)
	case map[string]any:
		for k, v := range t {
			if strings.Contains(k, marker) || hasMarker(v, marker) {
				return true
			}
		}
	case []any:
		for _, v := range t {
			if hasMarker(v, marker) {
				return true
			}
		}
	}
	return false
}

// mayNeedWork is the cheap test run on every string: only strings containing
// "{{" or "$(" can hold variables, references or their escapes.
func mayNeedWork(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, "$(")
}

// Find returns the expressions of the variables in s, trimmed of braces and
// whitespace, in order. For nested variables only the innermost are returned,
// since the outer expression is not known until they are substituted.
// Escaped variables are not returned.
func Find(s string) []string {
	if !strings.Contains(s, "{{") {
		return nil
	}
	var out []string
	for _, m := range variablePattern.FindAllStringSubmatch(s, -1) {
		expr, _ := parseVariable(m[2])
		out = append(out, expr)
	}
	return out
}

// parseVariable strips the braces from "{{ expr }}" and reports whether the
// variable is shallow ("{{- expr }}").
func parseVariable(v string) (expr string, shallow bool) {
	body := v[2 : len(v)-2]
	if strings.HasPrefix(body, "-") {
		return strings.TrimSpace(body[1:]), true
	}
	return strings.TrimSpace(body), false
}

// IsVariable reports whether s contains at least one unescaped variable.
func IsVariable(s string) bool {
	return strings.Contains(s, "{{") && variablePattern.MatchString(s)
}

// IsReference reports whether s contains at least one unescaped $(...)
// reference.
func IsReference(s string) bool {
	return strings.Contains(s, "$(") && referencePattern.MatchString(s)
}

// HasVariables reports whether any string or map key in doc holds a variable
// or a reference. It does not allocate.
func HasVariables(doc any) bool {
	switch t := doc.(type) {
	case string:
		return IsVariable(t) || IsReference(t)
	case map[string]any:
		for k, v := range t {
			if IsVariable(k) || IsReference(k) || HasVariables(v) {
				return true
			}
		}
	case []any:
		for _, v := range t {
			if HasVariables(v) {
				return true
			}
		}
	}
	return false
}

// needsWork is HasVariables that also counts escapes, which substitution must
// unescape.
func needsWork(doc any) bool {
	switch t := doc.(type) {
	case string:
		return mayNeedWork(t)
	case map[string]any:
		for k, v := range t {
			if mayNeedWork(k) || needsWork(v) {
				return true
			}
		}
	case []any:
		for _, v := range t {
			if needsWork(v) {
				return true
			}
		}
	}
	return false
}
