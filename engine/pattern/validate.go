package pattern

import (
	"fmt"
	"sort"
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
func (c *Compiled) Validate(resource any) *Error {
	w := walker{tracked: c.tracked}
	if c.tracked > len(w.inline)*64/2 {
		w.big = make([]uint64, 2*((c.tracked+63)/64))
	}
	f := w.element(resource, c.root, "/")
	if f == nil {
		return nil
	}
	switch {
	case f.kind == skipCondition || f.kind == skipGlobal:
		return &Error{Kind: Skip, Path: f.path, Msg: f.msg}
	case f.kind == failNegation:
		return &Error{Kind: Fail, Path: f.path, Msg: f.msg}
	case w.missingAnchorKeys() || f.path == "":
		return &Error{Kind: Invalid, Msg: f.msg}
	}
	return &Error{Kind: Fail, Path: f.path, Msg: f.msg}
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

type failure struct {
	kind failureKind
	path string
	msg  string
}

func (f *failure) skip() bool { return f.kind == skipCondition || f.kind == skipGlobal }

func fail(path, format string, args ...any) *failure {
	return &failure{kind: failPlain, path: path, msg: fmt.Sprintf(format, args...)}
}

// walker holds the state of one match: which (k) and ^(k) anchor keys were
// seen in the pattern while walking, and which of them were found in the
// resource. Kyverno turns a failure into an error with no path when one of
// them was never found ("missing anchor in resource").
type walker struct {
	tracked int
	inline  [4]uint64 // seen bits then found bits, for up to 128 keys
	big     []uint64
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
func (w *walker) element(res any, n *node, path string) *failure {
	switch n.kind {
	case nodeMap:
		m, ok := res.(map[string]any)
		if !ok {
			return fail(path, "pattern and resource have different structures. Path: %s. Expected %T, found %T", path, n.raw, res)
		}
		return w.mapping(m, n, path)
	case nodeArray:
		a, ok := res.([]any)
		if !ok {
			return fail(path, "validation rule failed at path %s, resource does not satisfy the expected overlay pattern", path)
		}
		return w.array(a, n, path)
	case nodeScalar:
		if a, ok := res.([]any); ok {
			for _, e := range a {
				if !n.scalar.match(e) {
					return fail(path, "resource value '%v' does not match '%v' at path %s", res, n.raw, path)
				}
			}
			return nil
		}
		if !n.scalar.match(res) {
			return fail(path, "resource value '%v' does not match '%v' at path %s", res, n.raw, path)
		}
		return nil
	}
	return fail(path, "failed at '%s', pattern contains unknown type", path)
}

func (w *walker) mapping(res map[string]any, n *node, path string) *failure {
	anchored, plain := n.anchored, n.plain
	if n.expandKeys {
		anchored, plain = expandKeys(n.fields, res)
	}
	for _, f := range n.fields {
		if f.track >= 0 {
			_, found := res[f.key]
			w.note(f.track, found)
		}
	}
	for _, f := range anchored {
		if e := w.field(res, f, path); e != nil {
			return e
		}
	}
	for _, f := range plain {
		if e := w.field(res, f, path); e != nil {
			return e
		}
	}
	return nil
}

// field applies one key of a pattern map to the resource map, according to
// its anchor (validate-semantics.md §2).
func (w *walker) field(res map[string]any, f *field, path string) *failure {
	value, present := res[f.key]
	here := path + f.key + "/"
	switch f.anchor {
	case anchor.Condition:
		if !present {
			return &failure{kind: skipCondition, path: here, msg: "conditional anchor mismatch: conditional anchor key doesn't exist in the resource"}
		}
		if e := w.element(value, f.value, here); e != nil {
			return &failure{kind: skipCondition, path: e.path, msg: "conditional anchor mismatch: " + e.msg}
		}
		return nil
	case anchor.Global:
		if !present {
			return nil
		}
		if e := w.element(value, f.value, here); e != nil {
			return &failure{kind: skipGlobal, path: e.path, msg: "global anchor mismatch: " + e.msg}
		}
		return nil
	case anchor.Equality:
		if !present {
			return nil
		}
		return w.element(value, f.value, here)
	case anchor.Negation:
		if !present {
			return nil
		}
		return &failure{kind: failNegation, path: here, msg: "negation anchor matched in resource: " + here + " is not allowed"}
	case anchor.Existence:
		if !present {
			return nil
		}
		return w.existence(value, f.value, here)
	}
	if f.star {
		if value != nil {
			return nil
		}
		return fail(path, "%s/%s not found", path, f.key)
	}
	return w.element(value, f.value, here)
}

// existence implements ^(key): every map of the pattern list must match at
// least one element of the resource list.
func (w *walker) existence(value any, n *node, path string) *failure {
	list, ok := value.([]any)
	if !ok {
		return fail(path, "invalid resource type %T: Existence ^ () anchor can be used only on list/array type resource", value)
	}
	if n.kind != nodeArray {
		return fail(path, "invalid pattern type %T: Pattern has to be of list to compare against resource", n.raw)
	}
	if n.mode == arrayEmpty {
		return nil
	}
	if n.mode != arrayOfMaps || !n.allMaps {
		return fail(path, "invalid pattern type %T: Pattern has to be of type map to compare against items in resource", n.raw)
	}
	for _, p := range n.elems {
		matched := false
		for i, e := range list {
			if w.element(e, p, path+strconv.Itoa(i)+"/") == nil {
				matched = true
				break
			}
		}
		if !matched {
			return fail(path, "existence anchor validation failed at path %s", path)
		}
	}
	return nil
}

func (w *walker) array(res []any, n *node, path string) *failure {
	switch n.mode {
	case arrayEmpty:
		return fail(path, "pattern Array empty")
	case arrayOfScalar:
		return w.element(res, n.elems[0], path)
	case arrayOfMaps:
		return w.eachElement(len(res), func(i int) *failure {
			return w.element(res[i], n.elems[0], path+strconv.Itoa(i)+"/")
		}, path)
	}
	if len(res) < len(n.elems) {
		return fail("", "validate Array failed, array length mismatch, resource Array len is %d and pattern Array len is %d", len(res), len(n.elems))
	}
	return w.eachElement(len(n.elems), func(i int) *failure {
		return w.element(res[i], n.elems[i], path+strconv.Itoa(i)+"/")
	}, path)
}

// eachElement runs check on n array elements. The first non-skip failure is
// returned; elements that skip are ignored unless every element skipped, in
// which case the array as a whole skips.
func (w *walker) eachElement(n int, check func(int) *failure, path string) *failure {
	var skips []*failure
	applied := 0
	for i := 0; i < n; i++ {
		e := check(i)
		switch {
		case e == nil:
			applied++
		case e.skip():
			skips = append(skips, e)
		default:
			return e
		}
	}
	if applied > 0 || len(skips) == 0 {
		return nil
	}
	if len(skips) == 1 {
		return skips[0]
	}
	combined := &failure{kind: skipGlobal, path: path}
	msgs := make([]string, len(skips))
	for i, s := range skips {
		msgs[i] = s.msg
		if s.kind == skipCondition {
			combined.kind = skipCondition
		}
	}
	combined.msg = strings.Join(msgs, "; ")
	return combined
}

// expandKeys resolves wildcard keys of a metadata.labels or
// metadata.annotations pattern against the resource's keys: each becomes
// the first resource key it matches, in sorted order (Kyverno takes the
// first in map order, which is random). Anchors are kept. A key that
// matches nothing stays as written and so is looked up literally.
func expandKeys(fields []*field, res map[string]any) (anchored, plain []*field) {
	var keys []string
	expanded := make([]*field, len(fields))
	for i, f := range fields {
		expanded[i] = f
		if !wildcard.ContainsWildcard(f.raw) {
			continue
		}
		if keys == nil {
			keys = make([]string, 0, len(res))
			for k := range res {
				keys = append(keys, k)
			}
			sort.Strings(keys)
		}
		for _, k := range keys {
			if wildcard.Match(f.key, k) {
				g := *f
				g.key, g.raw = k, anchor.Build(f.anchor, k)
				expanded[i] = &g
				break
			}
		}
	}
	return orderFields(expanded)
}
