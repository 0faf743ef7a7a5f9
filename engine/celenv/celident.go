package celenv

import (
	"strings"
	"sync"

	celcommon "github.com/google/cel-go/common"
	celast "github.com/google/cel-go/common/ast"
	celparser "github.com/google/cel-go/parser"
)

// ReadsIdent reports whether the CEL expression reads the identifier
// (a variable or library receiver); one that does not parse does not.
func ReadsIdent(expr, ident string) bool {
	reads, _ := IdentRead(expr, ident)
	return reads
}

// optionalParser parses CEL with the optional syntax (a.?b), which
// Kyverno's and the API server's environments allow.
var optionalParser = sync.OnceValues(func() (*celparser.Parser, error) {
	return celparser.NewParser(celparser.EnableOptionalSyntax(true))
})

// IdentRead reports whether the CEL expression reads the identifier,
// and whether it parsed (an expression that does not parse reads
// nothing).
func IdentRead(expr, ident string) (reads, parsed bool) {
	if !strings.Contains(expr, ident) {
		return false, true
	}
	p, err := optionalParser()
	if err != nil {
		return false, false
	}
	ast, errs := p.Parse(celcommon.NewTextSource(expr))
	if errs != nil && len(errs.GetErrors()) > 0 {
		return false, false
	}
	found := false
	celast.PreOrderVisit(ast.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.IdentKind && e.AsIdent() == ident {
			found = true
		}
	}))
	return found, true
}
