package cpol

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
			ref := review.RefOf(obj)
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
					if err := review.CheckRetarget(r.name, ref, res.object); err != nil {
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
	ref := review.RefOf(obj)
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
