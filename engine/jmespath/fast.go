package jmespath

import (
	"reflect"

	gojmespath "github.com/kyverno/go-jmespath"
)

// fastNode evaluates the part of JMESPath that policies use most — field
// paths, projections and flattens over lists, multi-select lists, `||`
// defaults, literals, indexes and pipes — over plain JSON data, the way
// the library's tree interpreter does, without its allocations: a missing
// key is a status, not a boxed NotFoundError, and result lists are sized
// once. Queries with any other node (functions, comparisons, filters,
// slices, hashes) are not compiled to it.
//
// Where the interpreter would reach for reflection (typed slices, structs,
// pointers in the data) or where the result is a missing key at the top
// (the library's error, with its key), evaluation stops with fastBail and
// the query is evaluated again by the library: the fast path never
// answers differently, it only answers less often. Evaluation has no side
// effects (no functions), so starting over is safe.
type fastNode struct {
	typ      gojmespath.ASTNodeType
	key      string // ASTField
	index    int    // ASTIndex
	literal  any    // ASTLiteral
	children []*fastNode
}

type fastStatus uint8

const (
	fastOK       fastStatus = iota
	fastNotFound            // a missing map key: the library's NotFoundError
	fastBail                // beyond the fast path: ask the library
)

// compileFast returns the fast form of an AST, or nil when a node is not
// covered.
func compileFast(n gojmespath.ASTNode) *fastNode {
	want := -1 // children expected
	out := &fastNode{typ: n.NodeType}
	switch n.NodeType {
	case gojmespath.ASTField:
		key, ok := n.Value.(string)
		if !ok {
			return nil
		}
		out.key, want = key, 0
	case gojmespath.ASTIndex:
		i, ok := n.Value.(int)
		if !ok {
			return nil
		}
		out.index, want = i, 0
	case gojmespath.ASTLiteral:
		out.literal, want = n.Value, 0
	case gojmespath.ASTIdentity, gojmespath.ASTCurrentNode:
		want = 0
	case gojmespath.ASTFlatten:
		want = 1
	case gojmespath.ASTSubexpression, gojmespath.ASTIndexExpression, gojmespath.ASTProjection, gojmespath.ASTOrExpression:
		want = 2
	case gojmespath.ASTMultiSelectList, gojmespath.ASTPipe:
		// any number
	default:
		return nil
	}
	if want >= 0 && len(n.Children) != want {
		return nil
	}
	for _, c := range n.Children {
		fc := compileFast(c)
		if fc == nil {
			return nil
		}
		out.children = append(out.children, fc)
	}
	return out
}

// fastValue is a value during evaluation: a value of the data (or a
// literal), held in the interface it came in, or a list the evaluation
// made, held as a slice. A list made for the node above to iterate (the
// operand of a flatten or a projection) is never boxed into an interface,
// and its backing array is handed to the next list the query makes
// (fastScratch): of the five lists
// "spec.[ephemeralContainers, initContainers, containers][].ports[].hostPort"
// makes, only the last is its result.
type fastValue struct {
	v    any   // when list is nil
	list []any // a list the evaluation made (never nil when it did)
}

// value is the value as the library would hold it.
func (r fastValue) value() any {
	if r.list != nil {
		return r.list
	}
	return r.v
}

// asList returns the value as a list of the data or of the evaluation.
func (r fastValue) asList() ([]any, bool) {
	if r.list != nil {
		return r.list, true
	}
	l, ok := r.v.([]any)
	return l, ok
}

// isSlice is the library's isSliceType of the value: a made list is one.
func (r fastValue) isSlice() bool { return r.list != nil || isSlice(r.v) }

// fastScratch keeps, for one evaluation, the backing arrays of lists
// already consumed by the node above, for the lists made after them. A
// nil scratch makes every list anew.
type fastScratch struct {
	free [4][]any
	n    int
}

// get returns an empty list with room for n elements.
func (s *fastScratch) get(n int) []any {
	if s != nil {
		for i := range s.n {
			if cap(s.free[i]) >= n {
				l := s.free[i]
				s.n--
				s.free[i], s.free[s.n] = s.free[s.n], nil
				return l[:0]
			}
		}
	}
	return make([]any, 0, n)
}

// put takes back a list the evaluation made and nothing holds any more.
func (s *fastScratch) put(l []any) {
	if s == nil || s.n == len(s.free) {
		return
	}
	clear(l)
	s.free[s.n] = l[:0]
	s.n++
}

// eval mirrors treeInterpreter.execute node by node (go-jmespath
// interpreter.go); the comments name what each case copies.
func (n *fastNode) eval(in fastValue, s *fastScratch) (fastValue, fastStatus) {
	switch n.typ {
	case gojmespath.ASTField:
		if in.list == nil {
			if m, ok := in.v.(map[string]any); ok {
				if x, ok := m[n.key]; ok {
					return fastValue{v: x}, fastOK
				}
				return fastValue{}, fastNotFound
			}
			// fieldFromStruct: nil for anything but a struct or a pointer.
			if in.v != nil {
				if k := reflect.TypeOf(in.v).Kind(); k == reflect.Struct || k == reflect.Pointer {
					return fastValue{}, fastBail
				}
			}
		}
		return fastValue{}, fastOK

	case gojmespath.ASTSubexpression, gojmespath.ASTIndexExpression:
		// Every error of the left side, a missing key included, is the
		// result.
		left, st := n.children[0].eval(in, s)
		if st != fastOK {
			return fastValue{}, st
		}
		return n.children[1].eval(left, s)

	case gojmespath.ASTFlatten:
		// Any error of the left side gives nil.
		left, st := n.children[0].eval(in, s)
		switch st {
		case fastBail:
			return fastValue{}, fastBail
		case fastNotFound:
			return fastValue{}, fastOK
		}
		list, ok := left.asList()
		if !ok {
			if left.isSlice() {
				return fastValue{}, fastBail
			}
			return fastValue{}, fastOK
		}
		size := 0
		for _, e := range list {
			if inner, ok := e.([]any); ok {
				size += len(inner)
			} else if isSlice(e) {
				return fastValue{}, fastBail
			} else {
				size++
			}
		}
		out := s.get(size)
		for _, e := range list {
			if inner, ok := e.([]any); ok {
				out = append(out, inner...)
			} else {
				out = append(out, e)
			}
		}
		if left.list != nil {
			s.put(left.list)
		}
		return fastValue{list: out}, fastOK

	case gojmespath.ASTProjection:
		// A missing key on the left is nil; nil results are dropped.
		left, st := n.children[0].eval(in, s)
		if st == fastBail {
			return fastValue{}, fastBail
		}
		list, ok := left.asList()
		if !ok {
			if left.isSlice() {
				return fastValue{}, fastBail
			}
			return fastValue{}, fastOK
		}
		out := s.get(len(list))
		for _, e := range list {
			cur, st := n.children[1].eval(fastValue{v: e}, s)
			if st == fastBail {
				return fastValue{}, fastBail
			}
			if v := cur.value(); v != nil {
				out = append(out, v)
			}
		}
		if left.list != nil {
			s.put(left.list)
		}
		return fastValue{list: out}, fastOK

	case gojmespath.ASTMultiSelectList:
		if in.list == nil && in.v == nil {
			return fastValue{}, fastOK
		}
		out := s.get(len(n.children))
		for _, c := range n.children {
			cur, st := c.eval(in, s)
			if st == fastBail {
				return fastValue{}, fastBail
			}
			out = append(out, cur.value()) // nil on a missing key
		}
		return fastValue{list: out}, fastOK

	case gojmespath.ASTOrExpression:
		matched, st := n.children[0].eval(in, s)
		if st == fastBail {
			return fastValue{}, fastBail
		}
		isFalse, known := true, true
		if matched.list != nil {
			isFalse = len(matched.list) == 0
		} else {
			isFalse, known = falsy(matched.v)
		}
		if !known {
			return fastValue{}, fastBail
		}
		if isFalse {
			if matched.list != nil {
				s.put(matched.list)
			}
			if matched, st = n.children[1].eval(in, s); st == fastBail {
				return fastValue{}, fastBail
			}
		}
		return matched, fastOK

	case gojmespath.ASTLiteral:
		return fastValue{v: n.literal}, fastOK

	case gojmespath.ASTIdentity, gojmespath.ASTCurrentNode:
		return in, fastOK

	case gojmespath.ASTIndex:
		list, ok := in.asList()
		if !ok {
			if in.isSlice() {
				return fastValue{}, fastBail
			}
			return fastValue{}, fastOK
		}
		i := n.index
		if i < 0 {
			i += len(list)
		}
		if i >= 0 && i < len(list) {
			return fastValue{v: list[i]}, fastOK
		}
		return fastValue{}, fastOK

	case gojmespath.ASTPipe:
		// A missing key in a stage passes nil on.
		result := in
		for _, c := range n.children {
			var st fastStatus
			if result, st = c.eval(result, s); st == fastBail {
				return fastValue{}, fastBail
			}
		}
		return result, fastOK
	}
	return fastValue{}, fastBail
}

// isSlice is the library's isSliceType.
func isSlice(v any) bool {
	return v != nil && reflect.TypeOf(v).Kind() == reflect.Slice
}

// falsy is the library's isFalse for the values that need no reflection;
// known is false for the others (typed slices and maps, pointers,
// structs).
func falsy(v any) (isFalse, known bool) {
	switch t := v.(type) {
	case nil:
		return true, true
	case bool:
		return !t, true
	case []any:
		return len(t) == 0, true
	case map[string]any:
		return len(t) == 0, true
	case string:
		return len(t) == 0, true
	case float64, int, int64:
		return false, true
	}
	return false, false
}
