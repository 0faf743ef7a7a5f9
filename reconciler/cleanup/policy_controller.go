package cleanup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/api/conditions"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/cleanuppolicies"
	"github.com/charter-dev/charter/clusterstate/impersonate"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/cleanup"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/reconciler/internal/runner"
)

// Condition types and reasons of a cleanup policy's status.
const (
	ConditionReady   = kyvernov2.CleanupConditionReady
	ConditionStalled = conditions.Stalled

	ReasonScheduled     = "Scheduled"
	ReasonSucceeded     = "Succeeded"
	ReasonRunFailed     = "RunFailed"
	ReasonInvalidPolicy = "InvalidPolicy"
)

// Event reasons and actions, as Kyverno names them (§6.4).
const (
	ReasonPolicyApplied = "PolicyApplied"
	ReasonPolicyError   = "PolicyError"
	ReasonDryRun        = "DryRun"
	actionCleanedUp     = "Resource Cleaned Up"
	actionNone          = "None"
)

// policyController runs cleanup policies on their schedules.
type policyController struct {
	o      *Options
	source *cleanuppolicies.Source
	client client.Client // status writes
	// dyn lists and deletes for cluster-scoped policies, with charter's
	// identity; impersonated for namespaced ones, as their namespace's
	// ServiceAccount (writerFor).
	dyn          dynamic.Interface
	impersonated *impersonate.Clients
	// actAs, when set (Options.ServiceAccount), lists and deletes for
	// every policy instead.
	actAs    dynamic.Interface
	disco    discovery.DiscoveryInterface
	loaders  loader.Loaders
	recorder events.EventRecorder
	m        *metrics
	now      func() time.Time

	queue *runner.Queue[cleanuppolicies.Key]

	mu    sync.Mutex
	types []apiType
}

func (c *policyController) run(ctx context.Context) error {
	// A policy is retried with backoff up to MaxRetryDelay for as long as
	// it fails: it is never dropped from the schedule.
	c.queue = runner.New(runner.Options[cleanuppolicies.Key]{Name: "cleanup-policies", Workers: c.o.PolicyWorkers, MaxDelay: c.o.MaxRetryDelay})
	defer c.queue.ShutDown()
	stop, err := c.source.Watch(ctx, func(k cleanuppolicies.Key) { c.queue.Add(k) })
	if err != nil {
		return err
	}
	defer stop()
	c.queue.Run(ctx, c.handle)
	return nil
}

// handle reconciles one policy and counts it in Kyverno's controller
// metrics.
func (c *policyController) handle(ctx context.Context, key cleanuppolicies.Key) (time.Duration, error) {
	c.m.reconciles.WithLabelValues(policyControllerName).Inc()
	after, err := c.reconcile(ctx, key)
	if err != nil {
		c.m.requeues.WithLabelValues(policyControllerName, strconv.Itoa(c.queue.Retries(key)+1)).Inc()
		c.o.Log.Error(err, "cleanup policy run failed; retrying", "policy", key.String())
	}
	return after, err
}

// reconcile runs the policy if it is due and returns when to look again
// (zero: not until the policy changes).
func (c *policyController) reconcile(ctx context.Context, key cleanuppolicies.Key) (time.Duration, error) {
	pol, err := c.source.Get(ctx, key)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	st, err := statusOf(pol)
	if err != nil {
		return 0, err
	}
	compiled, err := policycheck.CleanupPolicy(pol)
	if err != nil {
		// Admission refuses such policies; one can still predate charter.
		// It stays Stalled until its spec changes.
		return 0, c.setStatus(ctx, pol, st, statusUpdate{decision: decidedInvalid, msg: err.Error()})
	}
	now := c.now()
	ref := pol.GetCreationTimestamp().Time
	if t := st.lastExecution(); t != nil {
		ref = t.Time
	}
	due := compiled.Schedule().Next(ref)
	if now.Before(due) {
		if !st.decidedAt(pol.GetGeneration()) {
			msg := fmt.Sprintf("next run at %s", due.UTC().Format(time.RFC3339))
			if err := c.setStatus(ctx, pol, st, statusUpdate{decision: decidedScheduled, msg: msg}); err != nil {
				return 0, err
			}
		}
		return due.Sub(now), nil
	}
	deleted, runErr := c.runPolicy(ctx, compiled)
	if runErr != nil {
		// lastExecutionTime stays: the run is due until it succeeds.
		msg := fmt.Sprintf("run at %s failed (%d objects deleted before): %v", now.UTC().Format(time.RFC3339), deleted, runErr)
		if err := c.setStatus(ctx, pol, st, statusUpdate{decision: decidedRunFailed, msg: msg, runErr: runErr}); err != nil {
			return 0, errors.Join(runErr, err)
		}
		return 0, runErr
	}
	next := compiled.Schedule().Next(now)
	verb := "deleted"
	if compiled.DryRun() {
		verb = "dry run: would have deleted"
	}
	msg := fmt.Sprintf("%s %d objects at %s; next run at %s", verb, deleted, now.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339))
	if err := c.setStatus(ctx, pol, st, statusUpdate{decision: decidedRan, msg: msg, ran: now}); err != nil {
		return 0, err
	}
	return max(next.Sub(c.now()), time.Second), nil
}

// setStatus writes the update into pol's status (st, read from pol) and
// patches it.
func (c *policyController) setStatus(ctx context.Context, pol kyvernov2.CleanupPolicyInterface, st policyStatus, u statusUpdate) error {
	obj, ok := pol.(client.Object)
	if !ok {
		return fmt.Errorf("%T is not an API object", pol)
	}
	base := obj.DeepCopyObject().(client.Object)
	st.apply(pol.GetGeneration(), u)
	if err := c.client.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the status of %s: %w", CleanupKey(pol), err)
	}
	return nil
}

// CleanupKey names a policy in logs and errors: "ClusterCleanupPolicy/x"
// or "CleanupPolicy/ns/x".
func CleanupKey(p kyvernov2.CleanupPolicyInterface) string {
	// A ClusterCleanupPolicy's namespace is empty.
	return keyOf(p).String()
}

// keyOf is the key a policy is queued and read under.
func keyOf(p kyvernov2.CleanupPolicyInterface) cleanuppolicies.Key {
	k := cleanuppolicies.Key{Namespace: p.GetNamespace(), Name: p.GetName()}
	if _, ok := p.(policiesv1.DeletingPolicyLike); ok {
		k.Kind = p.GetKind()
	}
	return k
}

// runPolicy lists the policy's kinds and deletes (or, in a dry run,
// reports) what it selects. It goes on past errors, and returns them all
// with the number of objects deleted.
func (c *policyController) runPolicy(ctx context.Context, p *cleanup.Policy) (int, error) {
	run, err := p.Prepare(ctx, c.loaders)
	if err != nil {
		return 0, err
	}
	if _, ok := p.Source().(policiesv1.DeletingPolicyLike); ok && c.o.State != nil && c.o.State.Policies != nil {
		in := c.o.State.Policies.Installed()
		if in == nil {
			// Exceptions may keep objects: never delete before they are
			// known.
			return 0, fmt.Errorf("the installed PolicyExceptions are not known yet")
		}
		// The cache holds the exceptions of trusted namespaces only.
		if err := run.WithExceptions(in.CELExceptions, engine.ExceptionAnyNamespace); err != nil {
			// Their status says so; the others still count.
			c.o.Log.Error(err, "PolicyExceptions left out of a DeletingPolicy run", "policy", p.String())
		}
	}
	src := p.Source()
	namespace := ""
	if src.IsNamespaced() {
		namespace = src.GetNamespace()
		if c.o.excluded(namespace) {
			return 0, fmt.Errorf("namespace %s is excluded from cleanup", namespace)
		}
	}
	dyn, err := c.writerFor(src)
	if err != nil {
		return 0, err
	}
	var errs []error
	deleted := 0
	type selection struct {
		sel   string
		types []apiType
		err   error
	}
	var selections []selection
	for _, sel := range p.Kinds() {
		types, err := c.resolve(sel)
		selections = append(selections, selection{sel, types, err})
	}
	for _, gvr := range p.Resources() {
		// A DeletingPolicy names resources.
		types, err := c.resolveResource(gvr)
		selections = append(selections, selection{gvr.Resource, types, err})
	}
	for _, s := range selections {
		sel, types, err := s.sel, s.types, s.err
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, t := range types {
			if src.IsNamespaced() && !t.Namespaced {
				// Never deleted: say so rather than look in force.
				errs = append(errs, fmt.Errorf("kind %q is cluster-scoped: a namespaced CleanupPolicy acts only in its own namespace and cannot delete it", sel))
				continue
			}
			n, err := c.runType(ctx, dyn, p, run, sel, t, namespace)
			deleted += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return deleted, errors.Join(errs...)
}

// resolve maps a kind selector to served types, rediscovering once when
// it names none (a CRD may be new).
func (c *policyController) resolve(sel string) ([]apiType, error) {
	c.mu.Lock()
	types := c.types
	c.mu.Unlock()
	if out := resolveKind(types, sel); len(out) > 0 {
		return out, nil
	}
	types, err := discoverDeletable(c.disco)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.types = types
	c.mu.Unlock()
	if out := resolveKind(types, sel); len(out) > 0 {
		return out, nil
	}
	return nil, fmt.Errorf("kind %q: the API server serves no such kind that can be listed and deleted", sel)
}

// resolveResource maps a DeletingPolicy's resource (group and version
// may be "*") to served types, rediscovering once when it names none.
func (c *policyController) resolveResource(gvr schema.GroupVersionResource) ([]apiType, error) {
	find := func(types []apiType) []apiType {
		var out []apiType
		for _, t := range types {
			if t.GVR.Resource == gvr.Resource && (gvr.Group == "*" || gvr.Group == t.GVR.Group) && (gvr.Version == "*" || gvr.Version == t.GVR.Version) {
				out = append(out, t)
			}
		}
		return out
	}
	c.mu.Lock()
	types := c.types
	c.mu.Unlock()
	if out := find(types); len(out) > 0 {
		return out, nil
	}
	types, err := discoverDeletable(c.disco)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.types = types
	c.mu.Unlock()
	if out := find(types); len(out) > 0 {
		return out, nil
	}
	return nil, fmt.Errorf("resource %q: the API server serves no such resource that can be listed and deleted", gvr.String())
}

// writerFor is the client that lists and deletes for src: charter's own
// for a cluster-scoped policy; for a namespaced one, the ServiceAccount
// Options.PolicyServiceAccount of its namespace, impersonated, so that
// Kubernetes RBAC decides what a tenant's policy may delete. There is no
// fallback to charter's identity: a missing ServiceAccount or a refused
// request fails the run naming the ServiceAccount.
//
// Options.ServiceAccount, when set, acts for every policy instead.
func (c *policyController) writerFor(src kyvernov2.CleanupPolicyInterface) (dynamic.Interface, error) {
	if c.actAs != nil {
		return c.actAs, nil
	}
	if !src.IsNamespaced() {
		return c.dyn, nil
	}
	return c.impersonated.For(src.GetNamespace())
}

// runType lists the objects of one type (in namespace, for a namespaced
// policy) with dyn and deletes what the policy selects.
func (c *policyController) runType(ctx context.Context, dyn dynamic.Interface, p *cleanup.Policy, run *cleanup.Run, sel string, t apiType, namespace string) (int, error) {
	src := p.Source()
	var errs []error
	deleted := 0
	opts := metav1.ListOptions{Limit: c.o.PageSize}
	for {
		list, err := dyn.Resource(t.GVR).Namespace(namespace).List(ctx, opts)
		if err != nil {
			c.m.errors.WithLabelValues(c.labels(src, sel, namespace)...).Inc()
			return deleted, fmt.Errorf("listing %s: %w", t.GVR.String(), err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			ok, err := c.selects(ctx, run, t, obj)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !ok {
				continue
			}
			if err := c.delete(ctx, dyn, p, sel, t, obj); err != nil {
				errs = append(errs, err)
				continue
			}
			deleted++
		}
		if list.GetContinue() == "" {
			return deleted, errors.Join(errs...)
		}
		opts.Continue = list.GetContinue()
	}
}

// selects applies the safety rules (excluded namespaces, objects already
// being deleted) and then the policy.
func (c *policyController) selects(ctx context.Context, run *cleanup.Run, t apiType, obj *unstructured.Unstructured) (bool, error) {
	if obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	if t.GVR.Group == "" && t.GVR.Resource == "namespaces" && c.o.excluded(obj.GetName()) {
		return false, nil
	}
	if c.o.excluded(obj.GetNamespace()) {
		return false, nil
	}
	ns := obj.GetNamespace()
	return run.Selects(cleanup.Object{Object: obj.Object, Kind: t.GVK(), Resource: t.GVR, NamespaceLabels: func() map[string]string {
		if ns == "" || c.loaders.Namespaces == nil {
			return nil
		}
		labels, _ := c.loaders.Namespaces.NamespaceLabels(ctx, ns)
		return labels
	}})
}

func (c *policyController) delete(ctx context.Context, dyn dynamic.Interface, p *cleanup.Policy, sel string, t apiType, obj *unstructured.Unstructured) error {
	src := p.Source()
	target := fmt.Sprintf("%s/%s/%s", t.Kind, obj.GetNamespace(), obj.GetName())
	related := &corev1.ObjectReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
	regarding, _ := src.(client.Object)
	if p.DryRun() {
		c.recorder.Eventf(regarding, related, corev1.EventTypeNormal, ReasonDryRun, actionNone, "dry run: would clean up the target resource %s", target)
		return nil
	}
	uid := obj.GetUID()
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: src.GetSpec().DeletionPropagationPolicy}
	err := dyn.Resource(t.GVR).Namespace(obj.GetNamespace()).Delete(ctx, obj.GetName(), opts)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	case err != nil:
		c.m.errors.WithLabelValues(c.labels(src, sel, obj.GetNamespace())...).Inc()
		c.recorder.Eventf(regarding, related, corev1.EventTypeWarning, ReasonPolicyError, actionNone, "failed to clean up the target resource %s: %v", target, err)
		return fmt.Errorf("deleting %s: %w", target, err)
	}
	c.m.deleted.WithLabelValues(c.labels(src, sel, obj.GetNamespace())...).Inc()
	c.recorder.Eventf(regarding, related, corev1.EventTypeNormal, ReasonPolicyApplied, actionCleanedUp, "successfully cleaned up the target resource %s", target)
	return nil
}

func (c *policyController) labels(src kyvernov2.CleanupPolicyInterface, kind, namespace string) []string {
	prop := ""
	if p := src.GetSpec().DeletionPropagationPolicy; p != nil {
		prop = string(*p)
	}
	return []string{src.GetKind(), src.GetNamespace(), src.GetName(), kind, namespace, prop}
}
