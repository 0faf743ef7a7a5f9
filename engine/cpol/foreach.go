package cpol

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/review"
)

// foreach runs validate.foreach entries (validate-semantics.md §7) with
// patterns checked against scope: the resource at the top level, the
// enclosing element inside a nested foreach whose elements are not scoped.
// It reports false when no element of any entry applied at the top level:
// such a rule produces no response at all.
func (vd *validator) foreach(ctx context.Context, doc *jsoncontext.Document, list []*foreachValidation, scope map[string]any, nesting int) (review.Outcome, bool) {
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
		o, count := vd.elements(ctx, doc, fe, elements, scope, nesting)
		if o.Status != review.StatusPass {
			return o, true
		}
		applied += count
	}
	if applied == 0 {
		if listErr != nil {
			return review.Errored("failed to evaluate foreach list", listErr), true
		}
		if nesting == 0 {
			return review.Outcome{}, false
		}
		return review.Skip("rule skipped"), true
	}
	return review.Pass("rule passed"), true
}

// elements evaluates one foreach entry for each element and returns the
// first fail or error, or pass with the number of elements that applied.
//
// A map element becomes the scope its patterns are checked against unless
// elementScope is false; any other element leaves the enclosing scope, and
// elementScope: true on such an element is an error, as in Kyverno.
func (vd *validator) elements(ctx context.Context, doc *jsoncontext.Document, fe *foreachValidation, elements []any, scope map[string]any, nesting int) (review.Outcome, int) {
	applied := 0
	// One child document serves every element in turn: nothing keeps an
	// element's document once its outcome is known. It is the request's
	// document of this nesting level (elementDocument), so every foreach
	// of the review shares it too.
	var edoc *jsoncontext.Document
	for i, el := range elements {
		if el == nil {
			continue
		}
		resource := scope
		if m, ok := el.(map[string]any); ok && (fe.elementScope == nil || *fe.elementScope) {
			resource = m
		} else if !ok && fe.elementScope != nil && *fe.elementScope {
			return review.Errorf("failed to process foreach: cannot use elementScope=true foreach rules for elements that are not maps, expected type=map got type=%T", el), applied
		}
		edoc = vd.ev.st.elementDocument(edoc, doc, nesting)
		if err := vd.ev.enterElement(ctx, edoc, vd.rule, fe.context, el, i, nesting); err != nil {
			return review.Errored("validation failure: failed to load context", err), applied
		}
		ok, _, err := vd.ev.conditions(edoc, fe.preconditions)
		if err != nil || !ok {
			// An element whose preconditions fail or cannot be evaluated
			// does not apply.
			continue
		}
		var o review.Outcome
		switch {
		case fe.deny != nil:
			o = vd.deny(edoc, fe.deny, vd.v.message)
		case fe.pattern != nil:
			o = vd.pattern(edoc, resource, fe.pattern, vd.v.message)
		case len(fe.anyPattern) > 0:
			o = vd.anyPattern(edoc, resource, fe.anyPattern, vd.v.message)
		case len(fe.nested) > 0:
			var has bool
			if o, has = vd.foreach(ctx, edoc, fe.nested, resource, nesting+1); !has {
				continue
			}
		default:
			continue
		}
		switch o.Status {
		case review.StatusSkip:
			continue
		case review.StatusPass:
			applied++
		case review.StatusError:
			return review.Outcome{Status: review.StatusError, Message: "validation failure: " + o.Message}, applied
		default:
			return review.Fail("validation failure: " + o.Message), applied
		}
	}
	return review.Pass(""), applied
}

// elementDocument returns the document a foreach element at the nesting
// depth is evaluated in, as parent.Child() would: edoc again when it is
// set (the entry's earlier element), else the request's document of that
// depth, kept between the foreach entries and rules of the review (a
// nested foreach uses the next depth's, so its parent is not disturbed).
// A Pod review through the Pod Security policies made a child document,
// a map of a dozen entries, per foreach entry of each rule.
func (st *Request) elementDocument(edoc, parent *jsoncontext.Document, nesting int) *jsoncontext.Document {
	if edoc == nil && nesting < len(st.elementDocs) {
		edoc = st.elementDocs[nesting]
	}
	if edoc == nil {
		edoc = parent.Child()
		if nesting < maxElementDocs {
			for len(st.elementDocs) <= nesting {
				st.elementDocs = append(st.elementDocs, nil)
			}
			st.elementDocs[nesting] = edoc
		}
		return edoc
	}
	edoc.Reset(parent)
	return edoc
}

// maxElementDocs is how many nesting depths keep their element document.
const maxElementDocs = 4

// enterElement prepares doc, a child of the entry's document, for the
// element at index of a foreach entry at the nesting depth: it sets
// element, elementIndex, element<N> and elementIndex<N>, loads the entry's
// context entries and then pins the rule's foreachValues for the index
// (see pinElementValues).
func (ev *evaluation) enterElement(ctx context.Context, doc *jsoncontext.Document, r *rule, entries []kyvernov1.ContextEntry, el any, index, nesting int) error {
	elementN, indexN := elementNames(nesting)
	i := elementIndex(index)
	doc.SetRoot("element", el)
	doc.SetRoot("elementIndex", i)
	doc.SetRoot(elementN, el)
	doc.SetRoot(indexN, i)
	perElement := ev.foreachValues(r)
	if err := ev.loadEntries(ctx, doc, r, entries, perElement); err != nil {
		return err
	}
	return pinElementValues(doc, perElement, index)
}

// foreachValues returns the rule's foreachValues from the Values hook.
func (ev *evaluation) foreachValues(r *rule) map[string][]any {
	if ev.cfg.Values == nil {
		return nil
	}
	return ev.cfg.Values.ForeachElements(ev.policy.source, r.name)
}

// pinElementValues sets each variable of a rule's foreachValues (Values
// hook) to its value for the element at index, as Kyverno's CLI does: the
// values are indexed by element position and set after the element's
// context entries, so `element` itself can be pinned while the list being
// iterated, and the scope patterns check, stay the real ones. A list too
// short for the index is an error naming the variable (Kyverno's CLI
// panics there).
func pinElementValues(doc *jsoncontext.Document, vals map[string][]any, index int) error {
	if len(vals) == 0 {
		return nil
	}
	// Sized up front: this runs per request.
	keys := slices.AppendSeq(make([]string, 0, len(vals)), maps.Keys(vals))
	slices.Sort(keys)
	for _, k := range keys {
		list := vals[k]
		if index >= len(list) {
			return fmt.Errorf("foreachValues %q has %d values, none for element %d", k, len(list), index)
		}
		doc.Set(k, list[index])
	}
	return nil
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
// elementIndex is index as the JSON number a document holds: boxed once
// for the first indexes (a float64 in an interface is an allocation, and
// every foreach element sets two).
func elementIndex(index int) any {
	if index < len(elementIndexes) {
		return elementIndexes[index]
	}
	return float64(index)
}

var elementIndexes = func() []any {
	out := make([]any, 64)
	for i := range out {
		out[i] = float64(i)
	}
	return out
}()

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
