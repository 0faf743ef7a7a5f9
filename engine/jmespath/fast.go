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

// eval mirrors treeInterpreter.execute node by node (go-jmespath
// interpreter.go); the comments name what each case copies.
func (n *fastNode) eval(v any) (any, fastStatus) {
	switch n.typ {
	case gojmespath.ASTField:
		if m, ok := v.(map[string]any); ok {
			if x, ok := m[n.key]; ok {
				return x, fastOK
			}
			return nil, fastNotFound
		}
		// fieldFromStruct: nil for anything but a struct or a pointer.
		if v != nil {
			if k := reflect.TypeOf(v).Kind(); k == reflect.Struct || k == reflect.Pointer {
				return nil, fastBail
			}
		}
		return nil, fastOK

	case gojmespath.ASTSubexpression, gojmespath.ASTIndexExpression:
		// Every error of the left side, a missing key included, is the
		// result.
		left, st := n.children[0].eval(v)
		if st != fastOK {
			return nil, st
		}
		return n.children[1].eval(left)

	case gojmespath.ASTFlatten:
		// Any error of the left side gives nil.
		left, st := n.children[0].eval(v)
		switch st {
		case fastBail:
			return nil, fastBail
		case fastNotFound:
			return nil, fastOK
		}
		list, ok := left.([]any)
		if !ok {
			if isSlice(left) {
				return nil, fastBail
			}
			return nil, fastOK
		}
		size := 0
		for _, e := range list {
			if inner, ok := e.([]any); ok {
				size += len(inner)
			} else if isSlice(e) {
				return nil, fastBail
			} else {
				size++
			}
		}
		out := make([]any, 0, size)
		for _, e := range list {
			if inner, ok := e.([]any); ok {
				out = append(out, inner...)
			} else {
				out = append(out, e)
			}
		}
		return out, fastOK

	case gojmespath.ASTProjection:
		// A missing key on the left is nil; nil results are dropped.
		left, st := n.children[0].eval(v)
		if st == fastBail {
			return nil, fastBail
		}
		list, ok := left.([]any)
		if !ok {
			if isSlice(left) {
				return nil, fastBail
			}
			return nil, fastOK
		}
		out := make([]any, 0, len(list))
		for _, e := range list {
			cur, st := n.children[1].eval(e)
			if st == fastBail {
				return nil, fastBail
			}
			if cur != nil {
				out = append(out, cur)
			}
		}
		return out, fastOK

	case gojmespath.ASTMultiSelectList:
		if v == nil {
			return nil, fastOK
		}
		out := make([]any, 0, len(n.children))
		for _, c := range n.children {
			cur, st := c.eval(v)
			if st == fastBail {
				return nil, fastBail
			}
			out = append(out, cur) // nil on a missing key
		}
		return out, fastOK

	case gojmespath.ASTOrExpression:
		matched, st := n.children[0].eval(v)
		if st == fastBail {
			return nil, fastBail
		}
		isFalse, known := falsy(matched)
		if !known {
			return nil, fastBail
		}
		if isFalse {
			if matched, st = n.children[1].eval(v); st == fastBail {
				return nil, fastBail
			}
		}
		return matched, fastOK

	case gojmespath.ASTLiteral:
		return n.literal, fastOK

	case gojmespath.ASTIdentity, gojmespath.ASTCurrentNode:
		return v, fastOK

	case gojmespath.ASTIndex:
		list, ok := v.([]any)
		if !ok {
			if isSlice(v) {
				return nil, fastBail
			}
			return nil, fastOK
		}
		i := n.index
		if i < 0 {
			i += len(list)
		}
		if i >= 0 && i < len(list) {
			return list[i], fastOK
		}
		return nil, fastOK

	case gojmespath.ASTPipe:
		// A missing key in a stage passes nil on.
		result := v
		for _, c := range n.children {
			var st fastStatus
			if result, st = c.eval(result); st == fastBail {
				return nil, fastBail
			}
		}
		return result, fastOK
	}
	return nil, fastBail
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
