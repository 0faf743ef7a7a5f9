package pattern

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charter-dev/charter/engine/anchor"
	"github.com/charter-dev/charter/engine/wildcard"
)

// Validate matches resource against a validate pattern and returns nil when
// it passes. The pattern is compiled leniently: problems Compile would
// reject get the meaning Kyverno gives them at run time (an empty pattern
// array fails, an unknown anchor is a literal key).
func Validate(resource, pattern any) *Error {
	c, _ := compile(pattern)
	return c.Validate(resource)
}

// Validate matches resource (a decoded JSON object: map[string]any, []any,
// string, float64, bool, nil) against the compiled pattern.
func (c *Compiled) Validate(resource any) *Error { return c.validate(resource, true) }

// Verdict is Validate for callers that report a failure by its path, as
// Kyverno's validate rules do: the Msg of a Fail is left empty, so no
// message is made for it (the one of a Skip or an Invalid is made, as
// they are reported by it). Kind and Path are Validate's.
func (c *Compiled) Verdict(resource any) *Error { return c.validate(resource, false) }

func (c *Compiled) validate(resource any, failMsg bool) *Error {
	w := walker{tracked: c.tracked}
	if c.tracked > len(w.inline)*64/2 {
		w.big = make([]uint64, 2*((c.tracked+63)/64))
	}
	f := w.element(resource, c.root)
	if f == nil {
		return nil
	}
	switch {
	case f.kind == skipCondition || f.kind == skipGlobal:
		return &Error{Kind: Skip, Path: f.path, Msg: f.message()}
	case f.kind != failNegation && (w.missingAnchorKeys() || f.path == ""):
		return &Error{Kind: Invalid, Msg: f.message()}
	}
	e := &Error{Kind: Fail, Path: f.path}
	if failMsg {
		e.Msg = f.message()
	}
	return e
}

// failureKind tells how a failure propagates: Kyverno classifies errors by
// the anchor that produced them.
type failureKind uint8

const (
	failPlain     failureKind = iota
	failNegation              // X(k) matched; always a fail
	skipCondition             // (k) unmet: the enclosing map, and upwards, is skipped
	skipGlobal                // <(k) unmet: the whole rule is skipped
)

// failure is why a node did not match. Its message is made only when
// asked for (message): most failures are reported by their path alone,
// and a pattern walk may meet many that decide nothing (an element of an
// existence anchor's list, a branch another one decides).
type failure struct {
	kind failureKind
	path string
	msg  string
	// mismatch, when set, makes the message from expected and found
	// instead of msg.
	mismatch mismatchKind
	expected any // the pattern node
	found    any // the resource node
	// cause, when set, is the failure this one wraps: the message is
	// msg, a prefix, then the cause's.
	cause *failure
}

// mismatchKind is a failure whose message is made from the pattern and
// resource nodes.
type mismatchKind uint8

const (
	noMismatch mismatchKind = iota
	// shapeMismatch: a map pattern met something else.
	shapeMismatch
	// valueMismatch: a scalar pattern met a value it does not accept.
	valueMismatch
)

func (f *failure) skip() bool { return f.kind == skipCondition || f.kind == skipGlobal }

// message is Kyverno's message for the failure.
func (f *failure) message() string {
	switch {
	case f.cause != nil:
		return f.msg + f.cause.message()
	case f.mismatch == shapeMismatch:
		return fmt.Sprintf("pattern and resource have different structures. Path: %s. Expected %T, found %T", f.path, f.expected, f.found)
	case f.mismatch == valueMismatch:
		return fmt.Sprintf("resource value '%v' does not match '%v' at path %s", f.found, f.expected, f.path)
	}
	return f.msg
}

func fail(path, format string, args ...any) *failure {
	return &failure{kind: failPlain, path: path, msg: fmt.Sprintf(format, args...)}
}

// mismatch is a failPlain failure at path whose message is made from the
// pattern and resource nodes when it is asked for.
func mismatch(m mismatchKind, path string, expected, found any) *failure {
	return &failure{kind: failPlain, path: path, mismatch: m, expected: expected, found: found}
}

// wrapped is a failure of kind at path whose message is prefix followed
// by cause's, made when it is asked for.
func wrapped(kind failureKind, path, prefix string, cause *failure) *failure {
	return &failure{kind: kind, path: path, msg: prefix, cause: cause}
}

// walker holds the state of one match: which (k) and ^(k) anchor keys were
// seen in the pattern while walking, and which of them were found in the
// resource. Kyverno turns a failure into an error with no path when one of
// them was never found ("missing anchor in resource").
type walker struct {
	tracked int
	inline  [4]uint64 // seen bits then found bits, for up to 128 keys
	big     []uint64
	// The current position in the resource is depth segments: the first
	// ones in near, any deeper in far. A walker never points into itself,
	// so it stays on Validate's stack instead of costing an allocation per
	// pattern match.
	depth int
	near  [16]segment
	far   []segment
}

func (w *walker) bits() []uint64 {
	if w.big != nil {
		return w.big
	}
	return w.inline[:]
}

func (w *walker) note(idx int, found bool) {
	b := w.bits()
	half := len(b) / 2
	b[idx/64] |= 1 << (idx % 64)
	if found {
		b[half+idx/64] |= 1 << (idx % 64)
	}
}

func (w *walker) missingAnchorKeys() bool {
	b := w.bits()
	half := len(b) / 2
	for i := 0; i < half; i++ {
		if b[i]&^b[half+i] != 0 {
			return true
		}
	}
	return false
}

// element matches one resource node against one pattern node at path.
func (w *walker) element(res any, n *node) *failure {
	switch n.kind {
	case nodeMap:
		m, ok := res.(map[string]any)
		if !ok {
			return mismatch(shapeMismatch, w.path(), n.raw, res)
		}
		return w.mapping(m, n)
	case nodeArray:
		a, ok := res.([]any)
		if !ok {
			p := w.path()
			return fail(p, "validation rule failed at path %s, resource does not satisfy the expected overlay pattern", p)
		}
		return w.array(res, a, n)
	case nodeScalar:
		if a, ok := res.([]any); ok {
			for _, e := range a {
				if !n.scalar.match(e) {
					return mismatch(valueMismatch, w.path(), n.raw, res)
				}
			}
			return nil
		}
		if !n.scalar.match(res) {
			return mismatch(valueMismatch, w.path(), n.raw, res)
		}
		return nil
	}
	p := w.path()
	return fail(p, "failed at '%s', pattern contains unknown type", p)
}

func (w *walker) mapping(res map[string]any, n *node) *failure {
	fields, anchored, plain := n.fields, n.anchored, n.plain
	if n.expandKeys {
		fields = expandKeys(n.fields, res)
		anchored, plain = orderFields(fields)
	}
	for _, f := range fields {
		if f.track >= 0 {
			_, found := res[f.key]
			w.note(f.track, found)
		}
	}
	for _, f := range anchored {
		if e := w.field(res, f); e != nil {
			return e
		}
	}
	for _, f := range plain {
		if e := w.field(res, f); e != nil {
			return e
		}
	}
	return nil
}

// field applies one key of a pattern map to the resource map, according to
// its anchor (validate-semantics.md §2).
func (w *walker) field(res map[string]any, f *field) *failure {
	value, present := res[f.key]
	if f.star && f.anchor == anchor.None {
		if value != nil {
			return nil
		}
		p := w.path()
		return fail(p, "%s/%s not found", p, f.key)
	}
	w.push(f.key)
	defer w.pop()
	switch f.anchor {
	case anchor.Condition:
		if !present {
			return &failure{kind: skipCondition, path: w.path(), msg: "conditional anchor mismatch: conditional anchor key doesn't exist in the resource"}
		}
		if e := w.element(value, f.value); e != nil {
			return wrapped(skipCondition, e.path, "conditional anchor mismatch: ", e)
		}
		return nil
	case anchor.Global:
		if !present {
			return nil
		}
		if e := w.element(value, f.value); e != nil {
			return wrapped(skipGlobal, e.path, "global anchor mismatch: ", e)
		}
		return nil
	case anchor.Equality:
		if !present {
			return nil
		}
		return w.element(value, f.value)
	case anchor.Negation:
		if !present {
			return nil
		}
		p := w.path()
		return &failure{kind: failNegation, path: p, msg: "negation anchor matched in resource: " + p + " is not allowed"}
	case anchor.Existence:
		if !present {
			return nil
		}
		return w.existence(value, f.value)
	}
	return w.element(value, f.value)
}

// existence implements ^(key): every map of the pattern list must match at
// least one element of the resource list.
func (w *walker) existence(value any, n *node) *failure {
	list, ok := value.([]any)
	if !ok {
		return fail(w.path(), "invalid resource type %T: Existence ^ () anchor can be used only on list/array type resource", value)
	}
	if n.kind != nodeArray {
		return fail(w.path(), "invalid pattern type %T: Pattern has to be of list to compare against resource", n.raw)
	}
	if n.mode == arrayEmpty {
		return nil
	}
	if n.mode != arrayOfMaps || !n.allMaps {
		return fail(w.path(), "invalid pattern type %T: Pattern has to be of type map to compare against items in resource", n.raw)
	}
	for _, p := range n.elems {
		matched := false
		for i, e := range list {
			w.pushIndex(i)
			ok := w.element(e, p) == nil
			w.pop()
			if ok {
				matched = true
				break
			}
		}
		if !matched {
			p := w.path()
			return fail(p, "existence anchor validation failed at path %s", p)
		}
	}
	return nil
}

// array matches a resource list (list, also passed boxed as res so that a
// scalar pattern can be applied to it without boxing it again).
func (w *walker) array(res any, list []any, n *node) *failure {
	switch n.mode {
	case arrayEmpty:
		return fail(w.path(), "pattern Array empty")
	case arrayOfScalar:
		return w.element(res, n.elems[0])
	case arrayOfMaps:
		var skips skipList
		for i, e := range list {
			w.pushIndex(i)
			f := skips.add(w.element(e, n.elems[0]))
			w.pop()
			if f != nil {
				return f
			}
		}
		return skips.result(w)
	}
	if len(list) < len(n.elems) {
		return fail("", "validate Array failed, array length mismatch, resource Array len is %d and pattern Array len is %d", len(list), len(n.elems))
	}
	var skips skipList
	for i, p := range n.elems {
		w.pushIndex(i)
		f := skips.add(w.element(list[i], p))
		w.pop()
		if f != nil {
			return f
		}
	}
	return skips.result(w)
}

// skipList gathers the outcomes of array elements. The first non-skip
// failure is returned at once; elements that skip are ignored unless every
// element skipped, in which case the array as a whole skips.
type skipList struct {
	applied int
	skips   []*failure
}

// add records one element's outcome and returns it if it is a failure that
// must stop the array.
func (s *skipList) add(f *failure) *failure {
	switch {
	case f == nil:
		s.applied++
	case f.skip():
		s.skips = append(s.skips, f)
	default:
		return f
	}
	return nil
}

func (s *skipList) result(w *walker) *failure {
	if s.applied > 0 || len(s.skips) == 0 {
		return nil
	}
	if len(s.skips) == 1 {
		return s.skips[0]
	}
	combined := &failure{kind: skipGlobal, path: w.path()}
	msgs := make([]string, len(s.skips))
	for i, f := range s.skips {
		msgs[i] = f.message()
		if f.kind == skipCondition {
			combined.kind = skipCondition
		}
	}
	combined.msg = strings.Join(msgs, "; ")
	return combined
}

// segment is one step of the walk's position in the resource: a map key or
// an array index.
type segment struct {
	key     string
	index   int
	isIndex bool
}

func (w *walker) push(key string) { w.pushSegment(segment{key: key}) }
func (w *walker) pushIndex(i int) { w.pushSegment(segment{index: i, isIndex: true}) }

func (w *walker) pushSegment(s segment) {
	if w.depth < len(w.near) {
		w.near[w.depth] = s
	} else {
		w.far = append(w.far[:w.depth-len(w.near)], s)
	}
	w.depth++
}

func (w *walker) pop() { w.depth-- }

// segment returns the i-th step of the current position.
func (w *walker) segment(i int) segment {
	if i < len(w.near) {
		return w.near[i]
	}
	return w.far[i-len(w.near)]
}

// path renders the current position in Kyverno's form: "/" for the root,
// "/spec/containers/0/" below it. It is only called to report a failure, so
// the walk itself builds no strings.
func (w *walker) path() string {
	// Sized first: the path is then one allocation, not one per growth.
	n := 1
	for i := range w.depth {
		if s := w.segment(i); s.isIndex {
			n += decimalDigits(s.index) + 1
		} else {
			n += len(s.key) + 1
		}
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('/')
	for i := range w.depth {
		s := w.segment(i)
		if s.isIndex {
			b.WriteString(strconv.Itoa(s.index))
		} else {
			b.WriteString(s.key)
		}
		b.WriteByte('/')
	}
	return b.String()
}

// decimalDigits is the length of strconv.Itoa(i) for i >= 0.
func decimalDigits(i int) int {
	n := 1
	for ; i >= 10; i /= 10 {
		n++
	}
	return n
}

// expandKeys resolves wildcard keys of a metadata.labels or
// metadata.annotations pattern against the resource's keys: each becomes
// the first resource key it matches, in sorted order (Kyverno takes the
// first in map order, which is random). Anchors are kept. A key that
// matches nothing stays as written and so is looked up literally.
func expandKeys(fields []*field, res map[string]any) []*field {
	expanded := make([]*field, len(fields))
	for i, f := range fields {
		expanded[i] = f
		if !wildcard.ContainsWildcard(f.raw) {
			continue
		}
		first, found := "", false
		for k := range res {
			if (!found || k < first) && wildcard.Match(f.key, k) {
				first, found = k, true
			}
		}
		if found {
			g := *f
			g.key, g.raw = first, anchor.Build(f.anchor, first)
			expanded[i] = &g
		}
	}
	return expanded
}
