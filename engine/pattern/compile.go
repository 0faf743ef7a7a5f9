package pattern

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/charter-dev/charter/engine/anchor"
	"github.com/charter-dev/charter/engine/wildcard"
)

// Compiled is a pattern pre-processed for repeated matching: keys are
// classified and ordered, string patterns parsed. It is immutable and safe
// for concurrent use.
type Compiled struct {
	root *node
	// tracked is the number of distinct (key) and ^(key) anchor keys; see
	// walker.missingAnchorKeys.
	tracked   int
	variables bool
}

// HasVariables reports whether some key or string value of the pattern holds
// "{{" or "$(": such a pattern must be substituted and compiled again for
// every resource.
func (c *Compiled) HasVariables() bool { return c.variables }

type nodeKind uint8

const (
	nodeScalar nodeKind = iota
	nodeMap
	nodeArray
	nodeUnknown // a Go type no JSON decoder produces
)

type arrayMode uint8

const (
	arrayEmpty      arrayMode = iota
	arrayOfMaps               // first element is a map, applied to every resource element
	arrayOfScalar             // first element is a scalar, applied to every resource element
	arrayPositional           // anything else: element i against element i
)

type node struct {
	kind nodeKind
	raw  any // the pattern as written, for messages

	// nodeScalar
	scalar scalar

	// nodeMap
	fields []*field // all keys, in no particular order
	// anchored holds (k), =(k), ^(k) and X(k) keys, sorted by key: phase 1.
	anchored []*field
	// plain holds the other keys in phase 2 order (see orderFields).
	plain []*field
	// expandKeys is set for metadata.labels and metadata.annotations maps
	// that have wildcard keys: those are resolved against the resource.
	expandKeys bool

	// nodeArray
	mode arrayMode
	// elems holds the pattern elements: the first only for arrayOfScalar,
	// every map element for arrayOfMaps, all for arrayPositional.
	elems []*node
	// allMaps is set for arrayOfMaps when every element is a map.
	allMaps bool

	// hasAnchors is set when the subtree holds a validate anchor key.
	hasAnchors bool
}

type field struct {
	raw    string // the key as written, anchor included
	anchor anchor.Kind
	// key is what is looked up in the resource: the key inside the anchor
	// for validate anchors, the raw key for plain keys and +(k).
	key   string
	value *node
	// star is set when the value is exactly the string "*": the key must be
	// present and non-null.
	star bool
	// nested is set when the value holds an anchor somewhere below.
	nested bool
	// track is the index of a (k) or ^(k) key for walker.missingAnchorKeys,
	// or -1.
	track int
}

// Compile checks a validate pattern and compiles it. The error, a
// *CompileError, names the first problem: a malformed or unknown anchor
// ("~(x)"), an add anchor +(k) (mutate only), an existence anchor whose value
// is not a list of maps, an empty array, an operator without operand, or a
// value type that JSON cannot hold.
//
// Strings holding variables ("{{ }}", "$( )") are not checked for operators;
// substitute them and use Validate.
func Compile(pattern any) (*Compiled, error) {
	c, problems := compile(pattern)
	if len(problems) > 0 {
		return nil, problems[0]
	}
	return c, nil
}

// Check reports the first problem Compile would report, or nil.
func Check(pattern any) error {
	_, err := Compile(pattern)
	return err
}

// compile builds the node tree for any pattern. It never fails: whatever
// Compile rejects is still given the meaning Kyverno gives it at run time,
// so that Validate on an unchecked pattern behaves as Kyverno does.
func compile(pattern any) (*Compiled, []*CompileError) {
	b := builder{tracks: map[string]int{}}
	root := b.node(pattern, "", "")
	return &Compiled{root: root, tracked: len(b.tracks), variables: b.variables}, b.problems
}

type builder struct {
	tracks    map[string]int
	problems  []*CompileError
	variables bool
	// at is the position in the pattern, rendered only for problems.
	at []fieldStep
}

// fieldStep is one step of a field path: a map key or an array index.
type fieldStep struct {
	key   string
	index int // -1 for a key
}

func (b *builder) problem(format string, args ...any) {
	b.problems = append(b.problems, &CompileError{Field: b.fieldPath(), Msg: fmt.Sprintf(format, args...)})
}

// fieldPath renders the position as "spec.containers[0].image"; keys that
// are not plain identifiers are quoted: metadata.labels["app.kubernetes.io/name"].
func (b *builder) fieldPath() string {
	var sb strings.Builder
	for _, s := range b.at {
		switch {
		case s.index >= 0:
			sb.WriteString("[" + strconv.Itoa(s.index) + "]")
		case !isIdentifier(s.key):
			sb.WriteString("[" + strconv.Quote(s.key) + "]")
		default:
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(s.key)
		}
	}
	return sb.String()
}

func (b *builder) enterKey(key string) { b.at = append(b.at, fieldStep{key: key, index: -1}) }
func (b *builder) enterIndex(i int)    { b.at = append(b.at, fieldStep{index: i}) }
func (b *builder) leave()              { b.at = b.at[:len(b.at)-1] }

// node compiles p, found under the (anchor-stripped) keys parentKey and
// grandKey, which tell whether p holds labels or annotations.
func (b *builder) node(p any, parentKey, grandKey string) *node {
	switch v := p.(type) {
	case map[string]any:
		return b.mapNode(v, parentKey, grandKey)
	case []any:
		return b.arrayNode(v)
	}
	s, ok := compileScalar(p)
	if !ok {
		b.problem("unsupported pattern value of type %T", p)
		return &node{kind: nodeUnknown, raw: p}
	}
	if s.kind == scalarString {
		b.checkString(s.s)
	}
	return &node{kind: nodeScalar, raw: p, scalar: s}
}

func (b *builder) mapNode(m map[string]any, parentKey, grandKey string) *node {
	n := &node{kind: nodeMap, raw: m}
	labels := grandKey == "metadata" && (parentKey == "labels" || parentKey == "annotations")
	// Visit keys in order so that Compile reports the same problem first
	// every time.
	keys := slices.Sorted(maps.Keys(m))
	for _, raw := range keys {
		value := m[raw]
		if hasVariable(raw) {
			b.variables = true
		}
		f := &field{raw: raw, key: raw, track: -1}
		if a, ok := anchor.Parse(raw); ok && a.Kind != anchor.Add {
			f.anchor, f.key = a.Kind, a.Key
			n.hasAnchors = true
		} else if ok {
			b.problem("add anchor %q is only allowed in mutate patterns", raw)
		} else if err := anchor.Malformed(raw); err != nil {
			b.problem("%v", err)
		}
		b.enterKey(f.key)
		f.value = b.node(value, f.key, parentKey)
		if f.anchor == anchor.Existence {
			b.checkExistence(value, raw)
		}
		b.leave()
		f.star = value == "*"
		f.nested = f.value.hasAnchors
		n.hasAnchors = n.hasAnchors || f.nested
		switch f.anchor {
		case anchor.Condition, anchor.Existence:
			idx, seen := b.tracks[raw]
			if !seen {
				idx = len(b.tracks)
				b.tracks[raw] = idx
			}
			f.track = idx
		}
		if labels && wildcard.ContainsWildcard(raw) {
			n.expandKeys = true
		}
		n.fields = append(n.fields, f)
	}
	n.anchored, n.plain = orderFields(n.fields)
	return n
}

func (b *builder) arrayNode(a []any) *node {
	n := &node{kind: nodeArray, raw: a}
	if len(a) == 0 {
		b.problem("empty array: a pattern array needs at least one element")
		n.mode = arrayEmpty
		return n
	}
	switch a[0].(type) {
	case map[string]any:
		// Only the first map is applied to array elements; an existence
		// anchor ^(k) uses them all, so compile every map element.
		n.mode = arrayOfMaps
		n.allMaps = true
		for i, e := range a {
			if _, ok := e.(map[string]any); !ok {
				n.allMaps = false
				n.hasAnchors = n.hasAnchors || hasAnchors(e)
				continue
			}
			b.enterIndex(i)
			n.elems = append(n.elems, b.node(e, "", ""))
			b.leave()
		}
	case string, float64, int, int64, bool, nil:
		n.mode = arrayOfScalar
		b.enterIndex(0)
		n.elems = []*node{b.node(a[0], "", "")}
		b.leave()
		for _, e := range a[1:] {
			n.hasAnchors = n.hasAnchors || hasAnchors(e)
		}
	default:
		n.mode = arrayPositional
		for i, e := range a {
			b.enterIndex(i)
			n.elems = append(n.elems, b.node(e, "", ""))
			b.leave()
		}
	}
	for _, e := range n.elems {
		n.hasAnchors = n.hasAnchors || e.hasAnchors
	}
	return n
}

// checkExistence requires ^(key) to hold a list of maps: Kyverno fails any
// other value at run time.
func (b *builder) checkExistence(value any, raw string) {
	list, ok := value.([]any)
	if !ok {
		b.problem("existence anchor %q needs a list of maps, got %s", raw, typeName(value))
		return
	}
	for _, e := range list {
		if _, ok := e.(map[string]any); !ok {
			b.problem("existence anchor %q needs a list of maps, got an element of type %s", raw, typeName(e))
			return
		}
	}
}

// checkString rejects comparison operators with nothing to compare to, e.g.
// ">=" or "<= | 5": they can never match.
func (b *builder) checkString(sp *stringPattern) {
	if hasVariable(sp.raw) {
		b.variables = true
		return
	}
	for _, alt := range sp.alts {
		for _, c := range alt {
			if c.op != opEqual && c.op < opInRange && c.operand == "" {
				b.problem("operator %q in %q has no operand", opText[c.op], sp.raw)
				return
			}
		}
	}
}

// orderFields splits map keys into Kyverno's two phases. Phase 1 holds the
// (k), =(k), ^(k) and X(k) anchors in key order. Phase 2 holds everything
// else: first the global anchors and the keys whose value contains anchors,
// in reverse key order, then the remaining keys in key order. The first
// failing key decides the result, so the order matters.
func orderFields(fields []*field) (anchored, plain []*field) {
	buf := make([]*field, 2*len(fields))
	sorted := buf[:len(fields)]
	copy(sorted, fields)
	slices.SortFunc(sorted, func(a, b *field) int { return strings.Compare(a.raw, b.raw) })
	out := buf[len(fields):]
	phase1, front := 0, 0
	for _, f := range sorted {
		switch {
		case isPhase1(f.anchor):
			phase1++
		case f.anchor == anchor.Global || f.nested:
			front++
		}
	}
	a, fr, bk := 0, phase1+front-1, phase1+front
	for _, f := range sorted {
		switch {
		case isPhase1(f.anchor):
			out[a] = f
			a++
		case f.anchor == anchor.Global || f.nested:
			out[fr] = f // filled from the back: reverse key order
			fr--
		default:
			out[bk] = f
			bk++
		}
	}
	return out[:phase1:phase1], out[phase1:]
}

// isPhase1 reports whether keys with anchor k are evaluated before the
// plain keys of their map.
func isPhase1(k anchor.Kind) bool {
	return k == anchor.Condition || k == anchor.Equality || k == anchor.Existence || k == anchor.Negation
}

// hasAnchors reports whether a pattern value holds a validate anchor key
// ((k), <(k), =(k), ^(k), X(k)) at any depth. The builder computes this
// bottom-up; this is for the array elements it does not compile.
func hasAnchors(p any) bool {
	switch v := p.(type) {
	case map[string]any:
		for k, e := range v {
			if kind := anchor.KindOf(k); kind != anchor.None && kind != anchor.Add {
				return true
			}
			if hasAnchors(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasAnchors(e) {
				return true
			}
		}
	}
	return false
}

func hasVariable(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, "$(")
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case float64, int, int64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
