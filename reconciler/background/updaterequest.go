package background

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/policyid"
)

// snapshot is what an UpdateRequest recorded of its admission request.
type snapshot struct {
	operation kyvernov1.AdmissionOperation
	object    map[string]any
	oldObject map[string]any
	// resource and subResource are the admission request's when it was
	// about a subresource (pods/eviction): its object is then the
	// trigger (subresourceTrigger).
	resource     schema.GroupVersionResource
	subResource  string
	userInfo     authenticationv1.UserInfo
	roles        []string
	clusterRoles []string
}

func snapshotOf(ur *kyvernov2.UpdateRequest) *snapshot {
	ctx := ur.Spec.Context
	s := &snapshot{}
	if ui := ctx.UserInfo; ui != nil {
		s.userInfo, s.roles, s.clusterRoles = ui.AdmissionUserInfo, ui.Roles, ui.ClusterRoles
	}
	if ai := ctx.AdmissionRequestInfo; ai != nil && ai.AdmissionRequest != nil {
		ar := ai.AdmissionRequest
		s.operation = kyvernov1.AdmissionOperation(ar.Operation)
		s.object = decodeRaw(ar.Object.Raw)
		s.oldObject = decodeRaw(ar.OldObject.Raw)
		if ar.SubResource != "" {
			s.resource = schema.GroupVersionResource{Group: ar.Resource.Group, Version: ar.Resource.Version, Resource: ar.Resource.Resource}
			s.subResource = ar.SubResource
		}
	}
	if s.operation == "" && ctx.AdmissionRequestInfo != nil {
		s.operation = kyvernov1.AdmissionOperation(ctx.AdmissionRequestInfo.Operation)
	}
	return s
}

func decodeRaw(raw []byte) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// request builds the engine request of a rule run for a trigger: the
// requester of the snapshot, if any, and the trigger as it is now. Work
// without an admission request (a policy change, a resync) runs as a
// CREATE (background mode); an UPDATE stays an UPDATE whose old object is
// the one the admission request held, as Kyverno's background context
// takes the operation and request.* from the UpdateRequest
// (background-cleanup.md §2.7), so a rule that matches UPDATE only, or
// reads request.oldObject, acts on it.
func (s *snapshot) request(trigger map[string]any) *engine.Request {
	req := &engine.Request{Operation: kyvernov1.Create, Object: trigger}
	if s != nil {
		req.UserInfo, req.Roles, req.ClusterRoles = s.userInfo, s.roles, s.clusterRoles
		req.Resource, req.SubResource = s.resource, s.subResource
		if s.operation == kyvernov1.Update && s.oldObject != nil {
			req.Operation, req.OldObject = kyvernov1.Update, s.oldObject
		}
	}
	return req
}

// subresourceTrigger returns the object of an admission request about a
// subresource (an Eviction of pods/eviction, a PodExecOptions of
// pods/exec): the trigger itself, which cannot be read back from the API
// server as other triggers are; nil for other requests.
func (s *snapshot) subresourceTrigger() map[string]any {
	if s == nil || s.subResource == "" {
		return nil
	}
	return s.object
}

// mutateRequest builds the engine request of a mutate-existing rule run
// for a trigger: request as snapshot.request, except that the deletion of
// the trigger stays a DELETE whose object and old object are the deleted
// object (background-cleanup.md §4.1), as Kyverno's background context
// has it, so a rule that matches only DELETE (or checks
// request.operation) acts on it.
func (s *snapshot) mutateRequest(trigger map[string]any) *engine.Request {
	req := s.request(trigger)
	if s.op() == kyvernov1.Delete {
		req.Operation, req.OldObject = kyvernov1.Delete, trigger
	}
	return req
}

// reconcileUpdateRequest carries out one UpdateRequest: done, it is
// deleted; failed, it goes back to Pending with the reason and waits its
// backoff, or, after MaxAttempts, stays Failed with an event on the
// policy.
func (c *Controller) reconcileUpdateRequest(ctx context.Context, r *run, key types.NamespacedName) error {
	var ur kyvernov2.UpdateRequest
	if err := c.reader.Get(ctx, key, &ur); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	switch ur.Status.State {
	case kyvernov2.Completed:
		return c.deleteUpdateRequest(ctx, &ur)
	case kyvernov2.Failed:
		if _, again := r.retryFailed.LoadAndDelete(key); !again {
			return nil
		}
	case kyvernov2.Skip:
		return nil
	}
	err := c.carryOut(ctx, &ur)
	if err == nil {
		if err := c.deleteUpdateRequest(ctx, &ur); err != nil {
			return err
		}
		c.stats.Completed.Add(1)
		return nil
	}
	attempts := ur.Status.RetryCount + 1
	ur.Status.RetryCount = attempts
	var notLive *errTriggerNotLive
	switch {
	case errors.As(err, &notLive):
		ur.Status.State = kyvernov2.Skip
		ur.Status.Message = err.Error()
	case attempts >= c.opts.MaxAttempts:
		ur.Status.State = kyvernov2.Failed
		ur.Status.Message = fmt.Sprintf("failed after %d attempts: %v", attempts, err)
	default:
		ur.Status.State = kyvernov2.Pending
		ur.Status.Message = fmt.Sprintf("attempt %d of %d failed, retrying in %s: %v", attempts, c.opts.MaxAttempts, c.retryDelay(attempts), err)
	}
	if uerr := c.client.Status().Update(ctx, &ur); uerr != nil {
		if apierrors.IsNotFound(uerr) {
			return nil
		}
		// Another leader wrote it first: read it again.
		return uerr
	}
	if ur.Status.State == kyvernov2.Skip {
		return nil
	}
	if ur.Status.State == kyvernov2.Failed {
		c.stats.Failed.Add(1)
		c.policyEvent(c.requestPolicy(&ur.Spec), "Warning", ReasonUpdateRequestFailed,
			fmt.Sprintf("UpdateRequest %s/%s (%s for %s) failed after %d attempts: %v", ur.Namespace, ur.Name, ur.Spec.Type, triggerOfSpec(ur.Spec.Resource), attempts, err))
		return nil
	}
	r.urs.AddAfter(key, c.retryDelay(attempts))
	return nil
}

// carryOut runs every rule context of an UpdateRequest and joins their
// failures.
func (c *Controller) carryOut(ctx context.Context, ur *kyvernov2.UpdateRequest) error {
	snap := snapshotOf(ur)
	id := c.requestPolicy(&ur.Spec)
	if _, ok := c.compiled.Load().byID[id]; !ok {
		return fmt.Errorf("policy %s is not installed, or has no generate or mutate-existing rule that compiles", ur.Spec.Policy)
	}
	switch ur.Spec.Type {
	case kyvernov2.Mutate, kyvernov2.CELMutate:
		return c.do(ctx, workItem{typ: kyvernov2.Mutate, policy: id, rule: ur.Spec.Rule, trigger: triggerOfSpec(ur.Spec.Resource)}, snap)
	case kyvernov2.Generate, kyvernov2.CELGenerate, "":
		var errs []string
		for _, rc := range ur.Spec.RuleContext {
			w := workItem{typ: kyvernov2.Generate, policy: id, rule: rc.Rule, trigger: triggerOfSpec(rc.Trigger), deleteDownstream: rc.DeleteDownstream}
			if err := c.do(ctx, w, snap); err != nil {
				errs = append(errs, fmt.Sprintf("rule %s: %v", rc.Rule, err))
			}
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "; "))
		}
		return nil
	default:
		return fmt.Errorf("requestType %q is not supported (want generate, mutate, cel-generate or cel-mutate)", ur.Spec.Type)
	}
}

// requestPolicy is the policyid.Of of the policy an UpdateRequest
// names: spec.policy is a key, and requestType tells a policies.kyverno.io
// policy's requests (cel-generate, cel-mutate) from a ClusterPolicy's or
// Policy's of the same key. A generate or mutate request of a key no
// ClusterPolicy or Policy holds, written before charter told them apart,
// names the GeneratingPolicy or MutatingPolicy of that key.
func (c *Controller) requestPolicy(spec *kyvernov2.UpdateRequestSpec) string {
	if kind := policiesv1.UpdateRequestPolicyKind(spec); kind != "" {
		return policyid.For(kind, spec.Policy)
	}
	if _, ok := c.compiled.Load().byID[spec.Policy]; ok {
		return spec.Policy
	}
	legacy := *spec
	legacy.Type = kyvernov2.CELGenerate
	if spec.Type == kyvernov2.Mutate {
		legacy.Type = kyvernov2.CELMutate
	}
	return policyid.For(policiesv1.UpdateRequestPolicyKind(&legacy), spec.Policy)
}

func (c *Controller) deleteUpdateRequest(ctx context.Context, ur *kyvernov2.UpdateRequest) error {
	if err := c.client.Delete(ctx, ur); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// errTriggerNotLive says an UpdateRequest named a trigger of an UPDATE
// that the API server does not hold (any more): it was deleted since, was
// replaced under its name (another uid), or never existed, because the
// admission review the request came from was forged. Only an object read
// from the API server drives a write, so the request is skipped: its
// state goes to Skip with this message.
type errTriggerNotLive struct {
	trigger triggerRef
	reason  error
}

func (e *errTriggerNotLive) Error() string {
	return fmt.Sprintf("%s with uid %s is not in the cluster (%v): the UpdateRequest is not acted on, as only a trigger read from the API server drives a write", e.trigger, e.trigger.UID, e.reason)
}

// mutateTrigger is the trigger a mutate-existing rule runs for, read from
// the API server, never taken on trust from the UpdateRequest: anything
// that reaches the webhook may post a review of an object that does not
// exist. The UpdateRequest of a CREATE waits (fails and is retried) until
// its object is stored; that of an UPDATE is skipped when its object is
// gone or has another uid; that of a DELETE runs on the deleted object it
// recorded only once the API server no longer has it. nil without an
// error: work of a watch or policy change whose trigger is gone.
func (c *Controller) mutateTrigger(ctx context.Context, w workItem, snap *snapshot) (map[string]any, error) {
	op := operationOf(snap)
	obj, err := c.fetchTrigger(ctx, w.trigger)
	gone := errors.Is(err, errTriggerGone)
	switch {
	case err != nil && !gone:
		return nil, fmt.Errorf("fetching trigger %s: %w", w.trigger, err)
	case snap != nil && op == kyvernov1.Delete && !gone:
		return nil, fmt.Errorf("%s with uid %s still exists in the cluster; the delete request may have been rejected by the API server", w.trigger, w.trigger.UID)
	case snap != nil && op == kyvernov1.Delete:
		if snap.oldObject == nil {
			return nil, fmt.Errorf("the UpdateRequest of the deletion of %s holds no deleted object", w.trigger)
		}
		return snap.oldObject, nil
	case !gone:
		return obj, nil
	case snap == nil:
		return nil, nil
	case op == kyvernov1.Create:
		// Admission saw the CREATE before the object was stored.
		return nil, fmt.Errorf("%s with uid %s not found (yet); if the admission request was denied, or never came from the API server, this UpdateRequest fails for good", w.trigger, w.trigger.UID)
	default:
		return nil, &errTriggerNotLive{trigger: w.trigger, reason: err}
	}
}

// op is the admission operation of the snapshot's request, "" without
// one (work of a policy change, resync or watch).
func (s *snapshot) op() kyvernov1.AdmissionOperation {
	if s == nil {
		return ""
	}
	return s.operation
}

// operationOf is the snapshot's operation, CREATE without one.
func operationOf(s *snapshot) kyvernov1.AdmissionOperation {
	if s == nil || s.operation == "" {
		return kyvernov1.Create
	}
	return s.operation
}
