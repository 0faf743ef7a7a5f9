package background

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/policyid"
)

// triggerRef names a trigger. Name is empty when only the UID is known
// (a downstream object's labels).
type triggerRef struct {
	APIVersion, Kind, Namespace, Name string
	UID                               types.UID
}

func (t triggerRef) String() string {
	if t.Namespace == "" {
		return fmt.Sprintf("%s %s", t.Kind, t.Name)
	}
	return fmt.Sprintf("%s %s/%s", t.Kind, t.Namespace, t.Name)
}

// key identifies the trigger: by UID, else by kind, namespace and name.
func (t triggerRef) key() string {
	if t.UID != "" {
		return string(t.UID)
	}
	return t.Kind + "/" + t.Namespace + "/" + t.Name
}

func (t triggerRef) objectRef() generate.ObjectRef {
	return generate.ObjectRef{APIVersion: t.APIVersion, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, UID: t.UID}
}

func triggerOfSpec(s kyvernov1.ResourceSpec) triggerRef {
	return triggerRef{APIVersion: s.APIVersion, Kind: s.Kind, Namespace: s.Namespace, Name: s.Name, UID: s.UID}
}

// triggerFromLabels rebuilds the trigger of a downstream object from its
// generate.kyverno.io labels.
func triggerFromLabels(l map[string]string) triggerRef {
	gv := schema.GroupVersion{Group: l[generate.LabelTriggerGroup], Version: l[generate.LabelTriggerVersion]}
	return triggerRef{APIVersion: gv.String(), Kind: l[generate.LabelTriggerKind], Namespace: l[generate.LabelTriggerNS], UID: types.UID(l[generate.LabelTriggerUID])}
}

// workItem is one rule to carry out for one trigger. It is comparable, so
// the queue merges duplicates.
type workItem struct {
	typ kyvernov2.RequestType
	// policy is the policyid.Of.
	policy  string
	rule    string
	trigger triggerRef
	// deleteDownstream: the trigger went away; delete what the rule
	// generated for it.
	deleteDownstream bool
	// pruneStale: the rule's target changed in a policy update; the
	// objects it generated for the trigger that it no longer generates
	// are deleted or released (pruneStale in generate.go).
	pruneStale bool
	// sourceGone: the clone source of this uid was deleted; a
	// synchronized GeneratingPolicy deletes its clones of it for the
	// trigger (deleteClones in generate.go).
	sourceGone types.UID
	// fromDownstream: a downstream object of the rule, or its clone
	// source, changed (watches). The item acts only if the rule
	// synchronizes when it runs, not when it was queued: a policy edit
	// turning synchronize off just before a downstream object is deleted
	// may reach the controller after the deletion does (Kyverno's
	// update-policy-to-disable-sync tests).
	fromDownstream bool
}

func (w workItem) String() string {
	kind, key := policyid.Parse(w.policy)
	if kind == "" {
		kind = "policy"
	}
	return fmt.Sprintf("%s rule %s of %s %s for %s", w.typ, w.rule, kind, key, w.trigger)
}

// do carries out a work item. snapshot is the admission request of an
// UpdateRequest, nil for work from watches and policy changes.
// Its forbidden writes, or their absence, go to the policy's Background
// condition.
func (c *Controller) do(ctx context.Context, w workItem, snapshot *snapshot) error {
	var err error
	if w.typ == kyvernov2.Mutate {
		err = c.mutateExisting(ctx, w, snapshot)
	} else {
		err = c.generate(ctx, w, snapshot)
	}
	if ctx.Err() == nil {
		c.faults.record(w, err)
	}
	return err
}
