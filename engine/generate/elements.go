package generate

import (
	"context"
	"fmt"
	"sync"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/conditions"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/variables"
)

// Elements prepares the document of one generate.foreach element. Loading
// context entries and evaluating preconditions belong to the engine core
// (it owns the loaders for configMap, apiCall, ... and the compiled
// conditions); this is how Generate hands that work back to it.
type Elements interface {
	// Enter is called for each element of generate.foreach[entryIndex]
	// (entry), with doc already holding element, elementIndex, element0
	// and elementIndex0. It loads the entry's context entries into doc (in
	// order, each seeing the ones before) and then evaluates the entry's
	// preconditions against doc. It returns false when the preconditions
	// do not hold: the element then generates nothing. An error fails the
	// element (and is reported with the rule's error).
	Enter(ctx context.Context, doc *jsoncontext.Document, entryIndex int, entry *kyvernov1.ForEachGeneration) (bool, error)
}

// ElementsFunc adapts a function to Elements.
type ElementsFunc func(ctx context.Context, doc *jsoncontext.Document, entryIndex int, entry *kyvernov1.ForEachGeneration) (bool, error)

// Enter calls f.
func (f ElementsFunc) Enter(ctx context.Context, doc *jsoncontext.Document, entryIndex int, entry *kyvernov1.ForEachGeneration) (bool, error) {
	return f(ctx, doc, entryIndex, entry)
}

// BasicElements is the Elements used when the caller supplies none: it
// loads `variable` context entries (value, jmesPath, default) and
// evaluates preconditions the way Kyverno does (a variable that cannot be
// resolved counts as ""). Entries that need the cluster (configMap,
// apiCall, imageRegistry, globalReference) fail the element: a caller
// that has loaders passes its own Elements.
type BasicElements struct{}

// Enter implements Elements.
func (BasicElements) Enter(_ context.Context, doc *jsoncontext.Document, _ int, entry *kyvernov1.ForEachGeneration) (bool, error) {
	for i := range entry.Context {
		e := &entry.Context[i]
		if e.Variable == nil {
			return false, fmt.Errorf("context entry %q: only variable entries can be loaded without the engine's loaders", e.Name)
		}
		v, err := loadVariable(doc, e.Variable)
		if err != nil {
			return false, fmt.Errorf("context entry %q: %w", e.Name, err)
		}
		doc.Set(e.Name, v)
	}
	return Preconditions(doc, entry.AnyAllConditions)
}

func loadVariable(doc *jsoncontext.Document, v *kyvernov1.Variable) (any, error) {
	value, err := kyvernov1.FromJSON(v.Value)
	if err != nil {
		return nil, err
	}
	if value, err = variables.Substitute(value, doc); err != nil {
		return nil, err
	}
	def, err := kyvernov1.FromJSON(v.Default)
	if err != nil {
		return nil, err
	}
	if def, err = variables.Substitute(def, doc); err != nil {
		return nil, err
	}
	out := value
	if v.JMESPath != "" {
		expr, err := substituteString(doc, v.JMESPath)
		if err != nil {
			return nil, err
		}
		if value != nil {
			out, err = basicInterpreter().Search(expr, value)
		} else {
			out, err = doc.Query(expr)
		}
		if err != nil {
			if def == nil {
				return nil, fmt.Errorf("failed to evaluate %q: %w", expr, err)
			}
			out = nil
		}
	}
	if out == nil {
		out = def
	}
	return out, nil
}

// Preconditions evaluates an any/all block against doc, as Kyverno
// evaluates preconditions: any (one must hold, when listed) and all (every
// one must hold); a variable that cannot be resolved is an error naming
// it. A nil block holds.
func Preconditions(doc *jsoncontext.Document, block *kyvernov1.AnyAllConditions) (bool, error) {
	if block == nil {
		return true, nil
	}
	eval := func(c *kyvernov1.Condition) (bool, error) {
		key, err := c.Key()
		if err != nil {
			return false, err
		}
		value, err := c.Value()
		if err != nil {
			return false, err
		}
		if key, err = variables.Substitute(key, doc); err != nil {
			return false, err
		}
		if value, err = variables.Substitute(value, doc); err != nil {
			return false, err
		}
		return conditions.Evaluate(key, string(c.Operator), value)
	}
	if len(block.AnyConditions) > 0 {
		held := false
		for i := range block.AnyConditions {
			ok, err := eval(&block.AnyConditions[i])
			if err != nil {
				return false, err
			}
			if ok {
				held = true
				break
			}
		}
		if !held {
			return false, nil
		}
	}
	for i := range block.AllConditions {
		ok, err := eval(&block.AllConditions[i])
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func substituteString(doc *jsoncontext.Document, s string) (string, error) {
	if !variables.HasVariables(s) {
		return s, nil
	}
	out, err := variables.Substitute(s, doc)
	if err != nil {
		return "", err
	}
	str, ok := out.(string)
	if !ok {
		return "", fmt.Errorf("%q resolved to %T, want a string", s, out)
	}
	return str, nil
}

// basicInterpreter evaluates jmesPath entries against a literal value (the
// document's own interpreter evaluates against the document).
var basicInterpreter = sync.OnceValue(func() *jmespath.Interpreter { return jmespath.New() })
