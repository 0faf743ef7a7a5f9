package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/jsoncontext"
)

// foreach runs validate.foreach entries (validate-semantics.md §7). It
// reports false when no element of any entry applied at the top level:
// such a rule produces no response at all.
func (vd *validator) foreach(ctx context.Context, doc *jsoncontext.Document, list []*foreachValidation, nesting int) (outcome, bool) {
	applied := 0
	var listErr error
	for _, fe := range list {
		elements, err := vd.ev.evalList(doc, fe.list)
		if err != nil {
			if !jmespath.IsNotFound(err) && listErr == nil {
				listErr = err
			}
			continue
		}
		o, count := vd.elements(ctx, doc, fe, elements, nesting)
		if o.status != StatusPass {
			return o, true
		}
		applied += count
	}
	if applied == 0 {
		if listErr != nil {
			return errored("failed to evaluate foreach list", listErr), true
		}
		if nesting == 0 {
			return outcome{}, false
		}
		return skip("rule skipped"), true
	}
	return pass("rule passed"), true
}

// elements evaluates one foreach entry for each element and returns the
// first fail or error, or pass with the number of elements that applied.
func (vd *validator) elements(ctx context.Context, doc *jsoncontext.Document, fe *foreachValidation, elements []any, nesting int) (outcome, int) {
	applied := 0
	for i, el := range elements {
		if el == nil {
			continue
		}
		edoc := doc.Child()
		edoc.SetRoot("element", el)
		edoc.SetRoot("elementIndex", float64(i))
		elementN, indexN := elementNames(nesting)
		edoc.SetRoot(elementN, el)
		edoc.SetRoot(indexN, float64(i))
		resource := vd.ev.object
		if m, ok := el.(map[string]any); ok && (fe.elementScope == nil || *fe.elementScope) {
			resource = m
		}
		if err := vd.ev.loadContext(ctx, edoc, vd.rule, fe.context); err != nil {
			return errored("validation failure: failed to load context", err), applied
		}
		ok, _, err := vd.ev.conditions(edoc, fe.preconditions, true)
		if err != nil || !ok {
			// An element whose preconditions fail or cannot be evaluated
			// does not apply.
			continue
		}
		var o outcome
		switch {
		case fe.deny != nil:
			o = vd.deny(edoc, fe.deny, vd.v.message)
		case fe.pattern != nil:
			o = vd.pattern(edoc, resource, fe.pattern, vd.v.message)
		case len(fe.anyPattern) > 0:
			o = vd.anyPattern(edoc, resource, fe.anyPattern, vd.v.message)
		case len(fe.nested) > 0:
			var has bool
			if o, has = vd.foreach(ctx, edoc, fe.nested, nesting+1); !has {
				continue
			}
		default:
			continue
		}
		switch o.status {
		case StatusSkip:
			continue
		case StatusPass:
			applied++
		case StatusError:
			return outcome{status: StatusError, message: "validation failure: " + o.message}, applied
		default:
			return fail("validation failure: " + o.message), applied
		}
	}
	return pass(""), applied
}

// evalList evaluates a foreach list expression; a result that is not a list
// is wrapped as a one-element list.
func (ev *evaluation) evalList(doc *jsoncontext.Document, expr string) ([]any, error) {
	if strings.Contains(expr, "{{") {
		s, err := ev.substitute(doc, expr, "")
		if err != nil {
			return nil, err
		}
		str, ok := s.(string)
		if !ok {
			return nil, fmt.Errorf("foreach list %q did not resolve to an expression", expr)
		}
		expr = str
	}
	v, err := doc.Query(expr)
	if err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case []any:
		return t, nil
	case nil:
		return nil, nil
	default:
		return []any{t}, nil
	}
}

// elementNames returns the names of the nesting-specific element variables
// (element0/elementIndex0, element1/...).
func elementNames(nesting int) (string, string) {
	if nesting < len(elementVars) {
		return elementVars[nesting][0], elementVars[nesting][1]
	}
	return fmt.Sprintf("element%d", nesting), fmt.Sprintf("elementIndex%d", nesting)
}

var elementVars = func() [][2]string {
	out := make([][2]string, 8)
	for i := range out {
		out[i] = [2]string{fmt.Sprintf("element%d", i), fmt.Sprintf("elementIndex%d", i)}
	}
	return out
}()
