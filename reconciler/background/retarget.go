package background

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/review"
)

// The object written is the object read (issue #27): the engine refuses a
// mutate-existing patch that changes its target's apiVersion, kind,
// namespace or name, and a generated object outside a namespaced policy's
// namespace. The checks here run again right before each write, so that
// whatever slips past the engine is refused instead of written: the
// background controller's role may write where no tenant may.

// checkPatchedTarget refuses the write of a mutate-existing response
// whose patched target is not the target the engine read, or lies outside
// a namespaced policy's namespace.
func checkPatchedTarget(p kyvernov1.PolicyInterface, rr *engine.RuleResponse) error {
	if rr.Target == nil {
		u := unstructured.Unstructured{Object: rr.PatchedTarget}
		return fmt.Errorf("rule %s: the engine named no target it read for the patched %s %s; not written", rr.Name, u.GetKind(), objectName(u.GetNamespace(), u.GetName()))
	}
	if err := review.CheckRetarget(rr.Name, *rr.Target, rr.PatchedTarget); err != nil {
		return fmt.Errorf("%w; not written", err)
	}
	return targetInScope(p, rr.PatchedTarget)
}

// checkGeneratedScope refuses a namespaced policy's generated object that
// names another namespace than the policy's.
func checkGeneratedScope(d *generate.DesiredObject) error {
	if d.Policy.Namespace == "" {
		return nil
	}
	u := unstructured.Unstructured{Object: d.Object}
	if ns := u.GetNamespace(); ns != "" && ns != d.Policy.Namespace {
		return fmt.Errorf("rule %s: %s %s: a namespaced policy generates only into its own namespace %s, not %s; not written",
			d.Rule, u.GetKind(), objectName(ns, u.GetName()), d.Policy.Namespace, ns)
	}
	return nil
}
