package variables

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/charter-dev/charter/engine/jmespath"
)

// Resolver evaluates a variable's JMESPath expression. The engine's context
// implements it over a JSON document holding request, images, element,
// values and context entries.
type Resolver interface {
	Query(expr string) (any, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(expr string) (any, error)

// Query calls f.
func (f ResolverFunc) Query(expr string) (any, error) { return f(expr) }

// Error is a variable or reference that could not be substituted. Its message
// follows Kyverno's: `failed to resolve <expr> at path <path>: <cause>`.
type Error struct {
	Variable string // the expression (or $(reference)) as resolved
	Path     string // JSON pointer of the string, including the base path
	Err      error
}

func (e *Error) Error() string {
	return fmt.Sprintf("failed to resolve %s at path %s: %v", e.Variable, e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Option configures Substitute.
type Option func(*options)

type options struct {
	base        []segment
	missing     any
	hasMissing  bool
	deleteReq   bool
	noRefs      bool
	maxPasses   int
	maxLen      int
	noAtPointer bool
}

// WithPath sets the JSON pointer of doc within the rule, e.g.
// "/validate/pattern" or "/mutate/foreach/0/patchStrategicMerge". It prefixes
// the paths in errors, anchors $(...) references, and locates {{@}}: the
// pointer's first two segments (or everything up to the last "foreach" and
// the two after it) are dropped to get the resource path.
func WithPath(pointer string) Option {
	return func(o *options) { o.base = parsePointer(pointer) }
}

// WithMissing makes variables whose expression hits a missing map key resolve
// to value instead of failing. Other errors (syntax, function errors) still
// fail. Kyverno fails on missing keys everywhere by default; this is for
// callers that choose a lenient mode.
func WithMissing(value any) Option {
	return func(o *options) { o.missing, o.hasMissing = value, true }
}

// ForDelete rewrites request.object to request.oldObject in every variable,
// as Kyverno does for DELETE requests, where only the old object exists.
func ForDelete(isDelete bool) Option {
	return func(o *options) { o.deleteReq = isDelete }
}

// WithoutReferences leaves $(...) references alone.
func WithoutReferences() Option {
	return func(o *options) { o.noRefs = true }
}

const (
	// defaultMaxPasses bounds re-scanning of substituted text, so a value
	// that expands to itself ({{a}} -> "x{{a}}") fails instead of looping.
	defaultMaxPasses = 64
	// defaultMaxLen bounds a substituted string.
	defaultMaxLen = 1 << 20
	// maxVariablesPerString bounds the variables resolved in one string
	// across all passes, so a value that doubles itself on every pass fails
	// fast instead of resolving millions of variables.
	maxVariablesPerString = 1000
)

// Substitute returns doc with every $(reference) and {{variable}} replaced.
// References are resolved first, against doc itself; then variables, through
// r. doc is not modified; parts without variables are shared with the result,
// and doc itself is returned when nothing needed substituting.
func Substitute(doc any, r Resolver, opts ...Option) (any, error) {
	if !needsWork(doc) {
		return doc, nil
	}
	s := newSubstituter(opts)
	s.resolver = r
	var err error
	if !s.noRefs {
		s.refRoot = doc
		if doc, _, err = s.walk(doc, referenceMarker, s.references); err != nil {
			return nil, err
		}
	}
	out, _, err := s.walk(doc, variableMarker, s.variables)
	return out, err
}

// SubstituteReferences resolves only the $(...) references of doc.
func SubstituteReferences(doc any, opts ...Option) (any, error) {
	if !needsWork(doc) {
		return doc, nil
	}
	s := newSubstituter(opts)
	s.refRoot = doc
	out, _, err := s.walk(doc, referenceMarker, s.references)
	return out, err
}

type substituter struct {
	options
	resolver Resolver
	refRoot  any
	path     []segment // position of the string being substituted, below base
}

func newSubstituter(opts []Option) *substituter {
	s := &substituter{options: options{maxPasses: defaultMaxPasses, maxLen: defaultMaxLen}}
	for _, o := range opts {
		o(&s.options)
	}
	return s
}

// leafFunc substitutes one string. key is true for map keys, whose result
// must stay a string; values may become typed.
type leafFunc func(s string, key bool) (any, error)

// walk rebuilds doc copy-on-write, applying leaf to every string value and
// map key that may need work. changed is false when doc is returned as is.
func (s *substituter) walk(doc any, marker string, leaf leafFunc) (out any, changed bool, err error) {
	switch t := doc.(type) {
	case string:
		if !strings.Contains(t, marker) {
			return t, false, nil
		}
		v, err := leaf(t, false)
		if err != nil {
			return nil, false, err
		}
		ns, isString := v.(string)
		return v, !isString || ns != t, nil
	case map[string]any:
		if !hasMarker(t, marker) {
			return t, false, nil
		}
		// Sorted keys make the first reported error deterministic.
		// Sized up front: this runs per request.
		keys := slices.AppendSeq(make([]string, 0, len(t)), maps.Keys(t))
		slices.Sort(keys)
		var m map[string]any // allocated on the first change
		for _, k := range keys {
			v := t[k]
			s.path = append(s.path, segment{key: k})
			nk := k
			if strings.Contains(k, marker) {
				kv, err := leaf(k, true)
				if err != nil {
					return nil, false, err
				}
				nk = kv.(string)
			}
			nv, vChanged, err := s.walk(v, marker, leaf)
			s.path = s.path[:len(s.path)-1]
			if err != nil {
				return nil, false, err
			}
			if m == nil && (nk != k || vChanged) {
				m = make(map[string]any, len(t))
				for k2, v2 := range t {
					m[k2] = v2
				}
			}
			if m != nil && (nk != k || vChanged) {
				if nk != k {
					delete(m, k)
				}
				m[nk] = nv
			}
		}
		if m == nil {
			return t, false, nil
		}
		return m, true, nil
	case []any:
		if !hasMarker(t, marker) {
			return t, false, nil
		}
		var a []any
		for i, v := range t {
			s.path = append(s.path, segment{index: i, isIndex: true})
			nv, vChanged, err := s.walk(v, marker, leaf)
			s.path = s.path[:len(s.path)-1]
			if err != nil {
				return nil, false, err
			}
			if vChanged {
				if a == nil {
					a = make([]any, len(t))
					copy(a, t)
				}
				a[i] = nv
			}
		}
		if a == nil {
			return t, false, nil
		}
		return a, true, nil
	}
	return doc, false, nil
}

// pointer renders the current path, prefixed by the base path, as a JSON
// pointer ("/" for the root).
func (s *substituter) pointer() string {
	all := make([]segment, 0, len(s.base)+len(s.path))
	all = append(all, s.base...)
	all = append(all, s.path...)
	return formatPointer(all)
}

// variables substitutes the {{ }} variables of one string.
func (s *substituter) variables(value string, key bool) (any, error) {
	var frozen []string // text of shallow substitutions, not to be re-scanned
	canFreeze := !strings.ContainsRune(value, placeholderOpen)
	resolved := 0
	for pass := 0; ; pass++ {
		matches := variablePattern.FindAllStringSubmatchIndex(value, -1)
		if len(matches) == 0 {
			break
		}
		if pass == s.maxPasses {
			return nil, &Error{Variable: truncateText(value), Path: s.pointer(), Err: fmt.Errorf("variables still unresolved after %d rounds of substitution", s.maxPasses)}
		}
		if resolved += len(matches); resolved > maxVariablesPerString {
			return nil, &Error{Variable: truncateText(value), Path: s.pointer(), Err: fmt.Errorf("more than %d variables in one string", maxVariablesPerString)}
		}
		var b strings.Builder
		last := 0
		for _, m := range matches {
			start, end := m[4], m[5]
			raw := value[start:end]
			expr, shallow := parseVariable(raw)
			expr = thaw(expr, frozen)
			val, err := s.resolve(expr)
			if err != nil {
				return nil, err
			}
			if start == 0 && end == len(value) && !key {
				// The whole string is one variable: keep the type.
				return thawValue(val, frozen), nil
			}
			text, err := stringify(val)
			if err != nil {
				return nil, &Error{Variable: expr, Path: s.pointer(), Err: err}
			}
			if shallow && canFreeze {
				text = freeze(&frozen, text)
			}
			b.WriteString(value[last:start])
			b.WriteString(text)
			last = end
		}
		b.WriteString(value[last:])
		value = b.String()
		if len(value) > s.maxLen {
			return nil, &Error{Variable: truncateText(value), Path: s.pointer(), Err: fmt.Errorf("substituted string exceeds %d bytes", s.maxLen)}
		}
	}
	value = thaw(value, frozen)
	if strings.Contains(value, `\{{`) {
		value = escapedVariablePattern.ReplaceAllStringFunc(value, func(m string) string { return m[1:] })
	}
	return value, nil
}

// resolve evaluates one variable expression.
func (s *substituter) resolve(expr string) (any, error) {
	if expr == "@" {
		expr = s.atExpression()
	}
	if s.deleteReq {
		expr = strings.ReplaceAll(expr, "request.object", "request.oldObject")
	}
	if s.resolver == nil {
		return nil, &Error{Variable: expr, Path: s.pointer(), Err: errors.New("no variables are available here")}
	}
	val, err := s.resolver.Query(expr)
	if err != nil {
		if s.hasMissing && jmespath.IsNotFound(err) {
			return s.missing, nil
		}
		return nil, &Error{Variable: expr, Path: s.pointer(), Err: err}
	}
	return val, nil
}

// atExpression builds the JMESPath of the resource value at the current
// pattern position: the rule path minus its first two segments (or minus
// everything through the last "foreach" and the two segments after it),
// under "target" when the resolver knows one (mutate-existing), else under
// "request.object".
func (s *substituter) atExpression() string {
	all := append(append([]segment{}, s.base...), s.path...)
	for i := len(all) - 1; i >= 0; i-- {
		if !all[i].isIndex && all[i].key == "foreach" {
			all = all[i+1:]
			break
		}
	}
	if len(all) >= 2 {
		all = all[2:]
	} else {
		all = nil
	}
	root := "request.object"
	if s.resolver != nil {
		if _, err := s.resolver.Query("target"); err == nil {
			root = "target"
		}
	}
	var b strings.Builder
	b.WriteString(root)
	for _, seg := range all {
		if seg.isIndex {
			b.WriteString("[" + strconv.Itoa(seg.index) + "]")
			continue
		}
		b.WriteString(".")
		b.WriteString(jmespathIdentifier(stripAnchor(seg.key)))
	}
	return b.String()
}

// jmespathIdentifier quotes a key unless it is a bare JMESPath identifier.
func jmespathIdentifier(k string) string {
	bare := k != ""
	for i, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			bare = false
			break
		}
	}
	if bare {
		return k
	}
	q, _ := json.Marshal(k)
	return string(q)
}

// stringify renders a value embedded in a longer string: strings as they are,
// everything else as JSON (null for nil). Like Kyverno, encoding/json's HTML
// escaping applies ("<" becomes \u003c).
func stringify(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("cannot render %T as text: %w", v, err)
	}
	return string(b), nil
}

// Shallow ({{- }}) substitutions are replaced by placeholders made of
// private-use runes, which the variable pattern never matches, and restored
// after the last pass. Strings that already contain the opening rune fall
// back to deep substitution.
const (
	placeholderOpen  = '\uE000'
	placeholderClose = '\uE001'
)

func freeze(frozen *[]string, text string) string {
	*frozen = append(*frozen, text)
	return string(placeholderOpen) + strconv.Itoa(len(*frozen)-1) + string(placeholderClose)
}

func thaw(s string, frozen []string) string {
	if len(frozen) == 0 || !strings.ContainsRune(s, placeholderOpen) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.IndexRune(s, placeholderOpen)
		if i < 0 {
			break
		}
		j := strings.IndexRune(s[i:], placeholderClose)
		if j < 0 {
			break
		}
		n, err := strconv.Atoi(s[i+len(string(placeholderOpen)) : i+j])
		if err != nil || n < 0 || n >= len(frozen) {
			break
		}
		b.WriteString(s[:i])
		b.WriteString(frozen[n])
		s = s[i+j+len(string(placeholderClose)):]
	}
	b.WriteString(s)
	return b.String()
}

func thawValue(v any, frozen []string) any {
	if s, ok := v.(string); ok {
		return thaw(s, frozen)
	}
	return v
}

// truncateText shortens text quoted in an error.
func truncateText(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:77] + "..."
}
