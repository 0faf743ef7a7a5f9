package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/wildcard"
)

// mutateTargets runs a mutate-existing rule (spec §5.2): for each targets
// entry, it selects existing objects through Loaders.Objects and patches
// each with `target` set to it, the entry's context loaded and its
// preconditions met. There is one response per target; the trigger is
// never changed. base carries the rule's name, type and properties.
func (ev *evaluation) mutateTargets(ctx context.Context, doc *jsoncontext.Document, r *rule, base review.RuleResponse) []review.RuleResponse {
	var out []review.RuleResponse
	failed := func(msg string) []review.RuleResponse {
		rr := base
		rr.Status, rr.Message = review.StatusError, msg
		return append(out, rr)
	}
	loader := ev.cfg.Loaders.Objects
	if loader == nil {
		return failed("failed to load targets: no loader for existing resources")
	}
	for i, t := range r.mutate.targets {
		q, err := ev.targetQuery(doc, t)
		if err != nil {
			return failed(fmt.Sprintf("failed to substitute variables in targets[%d]: %v", i, err))
		}
		objs, err := loader.Objects(ctx, q)
		if err != nil {
			return failed(fmt.Sprintf("failed to load targets %s/%s: %v", q.Kind, q.Name, err))
		}
		sel := labels.Everything()
		if q.Selector != nil {
			if sel, err = metav1.LabelSelectorAsSelector(q.Selector); err != nil {
				return failed(fmt.Sprintf("targets[%d].selector: %v", i, err))
			}
		}
		for _, obj := range objs {
			if !querySelects(q, obj, sel) {
				continue
			}
			ref := refOf(obj)
			rr := base
			rr.Target = &ref
			tdoc := doc.Child()
			tdoc.SetRoot("target", obj)
			if err := ev.loadContext(ctx, tdoc, r, t.context); err != nil {
				rr.Status, rr.Message = review.StatusError, "failed to load context: "+err.Error()
				out = append(out, rr)
				continue
			}
			ok, _, err := ev.conditions(tdoc, t.preconditions)
			switch {
			case err != nil:
				rr.Status, rr.Message = review.StatusError, "failed to evaluate preconditions: "+err.Error()
			case !ok:
				rr.Status, rr.Message = review.StatusSkip, "preconditions not met"
			default:
				res := ev.mutateObject(ctx, tdoc, r, obj)
				rr.Status, rr.Message = res.status, res.message
				if res.status == review.StatusPass {
					if err := CheckRetarget(r.name, ref, res.object); err != nil {
						rr.Status, rr.Message = review.StatusError, err.Error()
						break
					}
					rr.PatchedTarget = res.object
				}
			}
			out = append(out, rr)
		}
	}
	return out
}

// targetQuery substitutes the variables of a targets entry. A namespaced
// Policy only reaches objects in its own namespace.
func (ev *evaluation) targetQuery(doc *jsoncontext.Document, t *mutateTarget) (loader.ObjectQuery, error) {
	q := loader.ObjectQuery{}
	for _, f := range []struct {
		dst *string
		src string
	}{{&q.APIVersion, t.spec.APIVersion}, {&q.Kind, t.spec.Kind}, {&q.Namespace, t.spec.Namespace}, {&q.Name, t.spec.Name}} {
		v, err := ev.substituteString(doc, f.src)
		if err != nil {
			return q, err
		}
		*f.dst = v
	}
	// A kind may name a subresource (Deployment/scale); the object listed is
	// the parent's.
	q.Kind, _, _ = strings.Cut(q.Kind, "/")
	if t.spec.Selector != nil {
		raw, err := json.Marshal(t.spec.Selector)
		if err != nil {
			return q, err
		}
		var m any
		if err := json.Unmarshal(raw, &m); err != nil {
			return q, err
		}
		sub, err := ev.substitute(doc, m, "/mutate/targets/selector")
		if err != nil {
			return q, err
		}
		if raw, err = json.Marshal(sub); err != nil {
			return q, err
		}
		q.Selector = &metav1.LabelSelector{}
		if err := json.Unmarshal(raw, q.Selector); err != nil {
			return q, err
		}
	}
	if src := ev.policy.source; src.IsNamespaced() {
		q.Namespace = src.GetNamespace()
	}
	return q, nil
}

// querySelects reports whether obj is one the query asks for.
func querySelects(q loader.ObjectQuery, obj map[string]any, sel labels.Selector) bool {
	ref := refOf(obj)
	if ref.APIVersion != q.APIVersion || ref.Kind != q.Kind {
		return false
	}
	if q.Namespace != "" && !wildcard.Match(q.Namespace, ref.Namespace) {
		return false
	}
	if q.Name != "" && !wildcard.Match(q.Name, ref.Name) {
		return false
	}
	if q.Selector != nil {
		meta, _ := obj["metadata"].(map[string]any)
		if !sel.Matches(labels.Set(review.StringMap(meta["labels"]))) {
			return false
		}
	}
	return true
}

// refOf names an unstructured object.
func refOf(obj map[string]any) review.ResourceRef {
	meta, _ := obj["metadata"].(map[string]any)
	ref := review.ResourceRef{}
	ref.APIVersion, _ = obj["apiVersion"].(string)
	ref.Kind, _ = obj["kind"].(string)
	ref.Namespace, _ = meta["namespace"].(string)
	ref.Name, _ = meta["name"].(string)
	return ref
}

// retargetError says a mutate-existing patch would write another object
// than the target it was given: its apiVersion, kind, namespace or name
// changed. The write is refused, whatever the policy's kind: the target was
// selected (and, for a namespaced policy, confined to its namespace) by
// its identity, and a patch that rewrote the identity would land on an
// object the selection never chose (a tenant's Policy relabelling
// another tenant's Namespace).
type retargetError struct {
	// Rule is the rule (for a MutatingPolicy, its synthetic rule, named
	// after the policy).
	Rule string
	// Read is the target as it was read.
	Read review.ResourceRef
	// Changes are the identity fields that differ, in the order
	// apiVersion, kind, namespace, name.
	Changes []identityChange
}

// identityChange is one identity field of an object and its two values.
type identityChange struct {
	Field    string
	From, To string
}

func (e *retargetError) Error() string {
	parts := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		parts[i] = fmt.Sprintf("%s from %s to %s", c.Field, quoteEmpty(c.From), quoteEmpty(c.To))
	}
	return fmt.Sprintf("rule %s: the patch changes the target's %s; a mutate-existing patch may not change apiVersion, kind, name or namespace",
		e.Rule, strings.Join(parts, " and "))
}

// quoteEmpty shows an empty identity field (a namespace removed) as "".
func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// identityChanges lists the identity fields in which two objects differ.
func identityChanges(read, written review.ResourceRef) []identityChange {
	var out []identityChange
	for _, f := range []struct{ field, from, to string }{
		{"apiVersion", read.APIVersion, written.APIVersion},
		{"kind", read.Kind, written.Kind},
		{"namespace", read.Namespace, written.Namespace},
		{"name", read.Name, written.Name},
	} {
		if f.from != f.to {
			out = append(out, identityChange{Field: f.field, From: f.from, To: f.to})
		}
	}
	return out
}

// CheckRetarget refuses a patched mutate-existing target whose identity
// differs from the target that was read. The engine checks every
// patched target with it; the background controller checks again at the
// write, so that nothing the engine missed is written.
func CheckRetarget(rule string, read review.ResourceRef, patched map[string]any) error {
	if changes := identityChanges(read, refOf(patched)); len(changes) > 0 {
		return &retargetError{Rule: rule, Read: read, Changes: changes}
	}
	return nil
}
