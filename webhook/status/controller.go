package status

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine/policyid"
)

// DefaultResyncInterval is how often the leader compares every policy's
// status with the cache even without a new snapshot, so a status someone
// else overwrote is put right.
const DefaultResyncInterval = time.Minute

// retryAfter is the wait after a failed reconcile.
const retryAfter = 2 * time.Second

// Snapshots is the policy cache as the controller sees it.
type Snapshots interface {
	Snapshot() *policycache.Snapshot
	Synced() bool
}

// Controller writes policy statuses. It runs on the leader only; every
// replica's cache compiles the same policies, and two leaders during a
// handover write the same statuses, so they converge.
type Controller struct {
	client   client.Client
	reader   client.Reader
	policies Snapshots
	interval time.Duration
	// configured is Options.Configured; nil: every policy is.
	configured func(kyvernov1.PolicyInterface) bool
	log        logr.Logger
	trigger    chan struct{}
	// params is WithParams'; nil: no policy reads params.
	params ParamFaults
	// reporting is WithReportingAccess'; nil: RBACPermissionsGranted is
	// left to the background controller.
	reporting ReportingAccess
}

// ParamFaults tells why a policy's param kinds cannot be read
// (params.Informers.Fault): a message, or false while undecided.
type ParamFaults interface {
	Fault(p kyvernov1.PolicyInterface) (string, bool)
}

// ReasonForbidden is the Ready reason of a policy whose param kind charter
// may not read.
const ReasonForbidden = "Forbidden"

// Option configures a Controller.
type Option func(*Controller)

// WithParams makes a policy whose param kinds charter may not read not
// Ready (reason Forbidden, naming the permission), and leaves a policy
// whose kinds were not checked yet for a later reconcile.
func WithParams(p ParamFaults) Option {
	return func(c *Controller) {
		if p != nil && !isNilParams(p) {
			c.params = p
		}
	}
}

// Options configure a Controller.
type Options struct {
	// Client writes the status subresource.
	Client client.Client
	// Reader lists the policies, usually the manager's cache (the informers
	// the policy cache reads). Defaults to Client.
	Reader client.Reader
	// Policies is the admission policy cache.
	Policies Snapshots
	// Interval between unprompted reconciles (default DefaultResyncInterval).
	Interval time.Duration
	// Configured, when set, reports whether the webhook configurations in
	// the API server were built from the policy's generation
	// (config.Controller.Configured). A policy is written Ready only once
	// they were: before, the API server may not send its resources to
	// charter, and the policy would look in force while it is not.
	Configured func(kyvernov1.PolicyInterface) bool
	Log        logr.Logger
}

// New returns a controller; call Trigger on every new snapshot
// (policycache.Cache.OnChange) and add it to a manager.
func New(o Options, opts ...Option) *Controller {
	if o.Reader == nil {
		o.Reader = o.Client
	}
	if o.Interval <= 0 {
		o.Interval = DefaultResyncInterval
	}
	c := &Controller{client: o.Client, reader: o.Reader, policies: o.Policies, interval: o.Interval,
		configured: o.Configured, log: o.Log, trigger: make(chan struct{}, 1)}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// isNilParams is true for a typed nil pointer in the interface.
func isNilParams(p ParamFaults) bool {
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Trigger asks for a reconcile soon. It never blocks, so the policy cache
// can call it from its own goroutine.
func (c *Controller) Trigger() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// NeedLeaderElection is true: only the leader writes statuses.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start reconciles on every trigger and every interval until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.trigger:
		case <-timer.C:
		}
		next := c.interval
		if err := c.Reconcile(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.log.Error(err, "policy status: reconcile failed; retrying", "after", retryAfter)
			next = retryAfter
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// Reconcile brings every policy's status in line with the current
// snapshot. Policies the snapshot does not reflect yet are left for the
// next one. Nothing is written before the cache's first snapshot.
func (c *Controller) Reconcile(ctx context.Context) error {
	if !c.policies.Synced() {
		return nil
	}
	snap := c.policies.Snapshot()
	policies, err := policycache.ListPolicies(ctx, c.reader)
	if err != nil {
		return err
	}
	// Each update may ask the API server twice (an access review, a
	// status patch): one at a time, a GitOps revision of hundreds of
	// policies waited minutes for its last Ready.
	errs := make([]error, len(policies))
	var g errgroup.Group
	g.SetLimit(statusWriters)
	for i, p := range policies {
		g.Go(func() error {
			errs[i] = c.update(ctx, p, snap)
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// statusWriters bounds the status updates of one reconcile in flight.
const statusWriters = 8

// update writes one policy's status when the verdict changes it.
func (c *Controller) update(ctx context.Context, p kyvernov1.PolicyInterface, snap *policycache.Snapshot) error {
	if p.GetDeletionTimestamp() != nil {
		return nil
	}
	v, ok := Decide(p, snap)
	if !ok {
		return nil
	}
	if v.Ready && c.params != nil {
		msg, decided := c.params.Fault(p)
		if !decided {
			return nil // the param informers look at its kinds first
		}
		if msg != "" {
			v = Verdict{Generation: v.Generation, Reason: ReasonForbidden, Message: msg}
		}
	}
	if v.Ready && p.GetSpec().AdmissionProcessingEnabled() && c.configured != nil && !c.configured(p) {
		// Ready waits for the webhook configurations (their controller
		// triggers this one once it wrote them); a policy with
		// spec.admission false has no webhook to wait for.
		return nil
	}
	if c.reporting != nil {
		cond, ok, err := reportingCondition(ctx, p, c.reporting, v.Generation)
		if err != nil {
			return fmt.Errorf("%s %s: %w", p.GetKind(), policyid.Key(p), err)
		}
		if ok {
			v.Reporting = &cond
		}
	}
	obj, ok := p.(client.Object)
	if !ok {
		return fmt.Errorf("%s %s: not a client.Object", p.GetKind(), policyid.Key(p))
	}
	orig := obj.DeepCopyObject().(client.Object)
	switch p := p.(type) {
	case policiesv1.StatusHolder:
		desired := DesiredPolicyStatus(p, v)
		if !Changed(p.GetStatus(), desired) {
			return nil
		}
		*p.GetStatus() = *desired
	case kyvernov1.StatusHolder:
		desired := Desired(p, v)
		if !Changed(p.GetStatus(), desired) {
			return nil
		}
		*p.GetStatus() = *desired
	default:
		return fmt.Errorf("%s %s: no status charter knows how to write", p.GetKind(), policyid.Key(p))
	}
	// A merge patch of the status alone, conditional on the
	// resourceVersion read: a merge patch replaces the whole conditions
	// list, so a stale read must not drop a condition another controller
	// wrote meanwhile (the background controller's Background or
	// RBACPermissionsGranted); a conflict is retried on the next
	// reconcile.
	if err := c.client.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%s %s: writing status: %w", p.GetKind(), policyid.Key(p), err)
	}
	c.log.V(1).Info("policy status written", "kind", p.GetKind(), "policy", policyid.Key(p), "ready", v.Ready, "generation", v.Generation)
	return nil
}
