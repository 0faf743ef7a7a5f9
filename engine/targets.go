package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/wildcard"
)

// mutateTargets runs a mutate-existing rule (spec §5.2): for each targets
// entry, it selects existing objects through Loaders.Objects and patches
// each with `target` set to it, the entry's context loaded and its
// preconditions met. There is one response per target; the trigger is
// never changed. base carries the rule's name, type and properties.
func (ev *evaluation) mutateTargets(ctx context.Context, doc *jsoncontext.Document, r *rule, base RuleResponse) []RuleResponse {
	var out []RuleResponse
	failed := func(msg string) []RuleResponse {
		rr := base
		rr.Status, rr.Message = StatusError, msg
		return append(out, rr)
	}
	loader := ev.cfg.loaders.Objects
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
			if !q.selects(obj, sel) {
				continue
			}
			ref := refOf(obj)
			rr := base
			rr.Target = &ref
			tdoc := doc.Child()
			tdoc.SetRoot("target", obj)
			if err := ev.loadContext(ctx, tdoc, r, t.context); err != nil {
				rr.Status, rr.Message = StatusError, "failed to load context: "+err.Error()
				out = append(out, rr)
				continue
			}
			ok, _, err := ev.conditions(tdoc, t.preconditions)
			switch {
			case err != nil:
				rr.Status, rr.Message = StatusError, "failed to evaluate preconditions: "+err.Error()
			case !ok:
				rr.Status, rr.Message = StatusSkip, "preconditions not met"
			default:
				res := ev.mutateObject(ctx, tdoc, r, obj)
				rr.Status, rr.Message = res.status, res.message
				if res.status == StatusPass {
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
func (ev *evaluation) targetQuery(doc *jsoncontext.Document, t *mutateTarget) (ObjectQuery, error) {
	q := ObjectQuery{}
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

// selects reports whether obj is one the query asks for.
func (q ObjectQuery) selects(obj map[string]any, sel labels.Selector) bool {
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
		if !sel.Matches(labels.Set(stringMap(meta["labels"]))) {
			return false
		}
	}
	return true
}

// refOf names an unstructured object.
func refOf(obj map[string]any) ResourceRef {
	meta, _ := obj["metadata"].(map[string]any)
	ref := ResourceRef{}
	ref.APIVersion, _ = obj["apiVersion"].(string)
	ref.Kind, _ = obj["kind"].(string)
	ref.Namespace, _ = meta["namespace"].(string)
	ref.Name, _ = meta["name"].(string)
	return ref
}
