package background

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
)

// mutateExisting carries out a mutate-existing rule for a trigger
// (background-cleanup.md §4.4): the engine patches each target it
// selects, and each patched target is written with an Update carrying the
// resourceVersion the engine read, so a concurrent edit makes the write
// fail with a conflict and the whole rule runs again on the new object,
// never overwriting the edit.
func (c *Controller) mutateExisting(ctx context.Context, w workItem, snap *snapshot) error {
	compiled := c.compiled.Load()
	p := compiled.byID[w.policy]
	rule := ruleOf(p, w.rule)
	if rule == nil || !rule.HasMutateExisting() {
		return nil
	}
	trigger, err := c.mutateTrigger(ctx, w, snap)
	if err != nil || trigger == nil {
		return err
	}
	resp := compiled.set.Mutate(ctx, snap.mutateRequest(trigger), engine.WithLoaders(c.loaders), engine.WithMutateExisting())
	var errs []error
	var done []engine.RuleResponse
	writeFailed := false
	for _, pr := range resp.Policies {
		if pr.ID() != w.policy {
			continue
		}
		for _, rr := range pr.Rules {
			if rr.Name != w.rule {
				continue
			}
			done = append(done, rr)
			switch rr.Status {
			case engine.StatusPass:
				if rr.PatchedTarget == nil {
					continue
				}
				if err := checkPatchedTarget(p, &rr); err != nil {
					errs = append(errs, err)
					writeFailed = true
					continue
				}
				if err := c.writeTarget(ctx, p, rr.PatchedTarget, rr.TargetSubresource); err != nil {
					errs = append(errs, err)
					writeFailed = true
				}
			case engine.StatusSkip:
			default:
				target := ""
				if rr.Target != nil {
					target = " " + rr.Target.Kind + " " + objectName(rr.Target.Namespace, rr.Target.Name)
				}
				errs = append(errs, fmt.Errorf("failed to mutate existing resource%s, rule %s, response %s: %s", target, rr.Name, rr.Status, rr.Message))
			}
		}
	}
	if !writeFailed && operationOf(snap) != kyvernov1.Delete {
		// The run's outcome for the trigger's report, once every patched
		// target is written (a failed write is retried; the
		// UpdateRequest tells it). A deleted trigger has no report.
		c.reportRun(p, triggerFromObject(trigger), done)
	}
	return errors.Join(errs...)
}

// writeTarget updates a patched target of p, conditional on the
// resourceVersion it was read at, as p's writer: through subresource when
// the policy selected the target as one (pods/resize), else the object.
func (c *Controller) writeTarget(ctx context.Context, p kyvernov1.PolicyInterface, obj map[string]any, subresource string) error {
	u := &unstructured.Unstructured{Object: obj}
	ri, mapping, err := c.writeResource(p, u.GetAPIVersion(), u.GetKind(), u.GetNamespace())
	if err != nil {
		return err
	}
	c.stats.Writes.Add(1)
	var subresources []string
	if subresource != "" {
		subresources = []string{subresource}
	}
	_, err = ri.Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager}, subresources...)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%s %s changed while it was mutated; mutating it again: %w", u.GetKind(), objectName(u.GetNamespace(), u.GetName()), err)
	}
	return c.describe(err, "update", mapping, u.GetNamespace(), u.GetName())
}
