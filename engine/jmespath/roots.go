package jmespath

import (
	"slices"

	gojmespath "github.com/kyverno/go-jmespath"
)

// rootReads are the top-level entries of the data (the context document)
// an expression may read: the fields it names where the current node is
// still the data itself. all is set when it may read any of them: it
// evaluates `@` there (the whole document), or has a node this analysis
// does not know.
type rootReads struct {
	all    bool
	fields []string
}

func (r rootReads) mayRead(key string) bool {
	return r.all || slices.Contains(r.fields, key)
}

// readsOfRoot walks the syntax tree as go-jmespath's tree interpreter
// evaluates it: a node's children see the same current node, except the
// right-hand side of a sub-expression, pipe, index expression and
// projection (and a filter's condition), which see what the left-hand
// side produced, and an expression reference (&expr), which a function
// applies to elements.
func readsOfRoot(n gojmespath.ASTNode) rootReads {
	var r rootReads
	r.walk(n)
	return r
}

func (r *rootReads) walk(n gojmespath.ASTNode) {
	if r.all {
		return
	}
	switch n.NodeType {
	case gojmespath.ASTField:
		key, ok := n.Value.(string)
		if !ok {
			r.all = true
			return
		}
		if !slices.Contains(r.fields, key) {
			r.fields = append(r.fields, key)
		}
	case gojmespath.ASTCurrentNode, gojmespath.ASTIdentity:
		r.all = true
	case gojmespath.ASTLiteral, gojmespath.ASTIndex, gojmespath.ASTSlice, gojmespath.ASTExpRef:
		// No map key of the current node (an index or slice of a map
		// is null; an expression reference is applied to elements).
	case gojmespath.ASTSubexpression, gojmespath.ASTIndexExpression, gojmespath.ASTPipe,
		gojmespath.ASTProjection, gojmespath.ASTValueProjection, gojmespath.ASTFilterProjection:
		// The left-hand side only: the rest sees its result.
		if len(n.Children) == 0 {
			r.all = true
			return
		}
		r.walk(n.Children[0])
	case gojmespath.ASTComparator, gojmespath.ASTFunctionExpression, gojmespath.ASTFlatten,
		gojmespath.ASTKeyValPair, gojmespath.ASTMultiSelectHash, gojmespath.ASTMultiSelectList,
		gojmespath.ASTOrExpression, gojmespath.ASTAndExpression, gojmespath.ASTNotExpression:
		for _, c := range n.Children {
			r.walk(c)
		}
	default:
		r.all = true
	}
}
