package config

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// DefaultResyncInterval is how often the leader checks the configurations
// even without a policy change, so a deleted configuration comes back.
const DefaultResyncInterval = 10 * time.Second

// Controller keeps the webhook configurations in step with the policies.
// It runs on the leader only; two leaders (during a handover) write the
// same objects from the same inputs, so they converge.
type Controller struct {
	Client client.Client
	// Policies returns the installed policies.
	Policies func() []kyvernov1.PolicyInterface
	// Resolver resolves kinds; refreshed before every build.
	Resolver *DiscoveryResolver
	// Settings returns the target, CA bundle and exclusions; an error
	// (no CA yet) postpones the reconcile.
	Settings func(ctx context.Context) (Settings, error)
	// Interval between unprompted reconciles (default 10 s).
	Interval time.Duration
	// OnApplied, when set, is called after each reconcile that left the
	// configurations in the API server as built from the policies (the
	// policy status controller's Trigger: Configured may have changed).
	OnApplied func()
	Log       logr.Logger

	trigger chan struct{}
	// applied holds the generation of each policy (by UID) the
	// configurations in the API server were last built from.
	mu      sync.Mutex
	applied map[types.UID]int64
}

// Configured reports whether the configurations in the API server were
// built from p at its generation or a later one. Until then the API server
// may not send p's resources to charter at all (a generate rule's
// Namespace trigger, say), so p must not look in force.
func (c *Controller) Configured(p kyvernov1.PolicyInterface) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	gen, ok := c.applied[p.GetUID()]
	return ok && gen >= p.GetGeneration()
}

// Trigger asks for a reconcile soon (policies or the CA changed).
func (c *Controller) Trigger() {
	c.init()
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

func (c *Controller) init() {
	if c.trigger == nil {
		c.trigger = make(chan struct{}, 1)
	}
}

// NeedLeaderElection is true: only the leader writes configurations.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start reconciles on every trigger and every Interval until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	c.init()
	interval := c.Interval
	if interval <= 0 {
		interval = DefaultResyncInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
			c.Log.Error(err, "webhook configuration: reconcile failed; retrying")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.trigger:
		case <-ticker.C:
		}
	}
}

// Reconcile builds the configurations and creates or updates them.
func (c *Controller) Reconcile(ctx context.Context) error {
	settings, err := c.Settings(ctx)
	if err != nil {
		return err
	}
	if err := c.Resolver.Refresh(); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	policies := c.Policies()
	cfgs, err := Build(policies, c.Resolver, settings)
	if err != nil {
		return err
	}
	for policy, kinds := range cfgs.Unresolved {
		c.Log.V(1).Info("policy matches kinds the API server does not serve", "policy", policy, "kinds", kinds)
	}
	for _, desired := range []client.Object{cfgs.PolicyValidating, cfgs.Validating, cfgs.Mutating} {
		if err := apply(ctx, c.Client, desired); err != nil {
			return err
		}
	}
	applied := make(map[types.UID]int64, len(policies))
	for _, p := range policies {
		applied[p.GetUID()] = p.GetGeneration()
	}
	c.mu.Lock()
	c.applied = applied
	c.mu.Unlock()
	if c.OnApplied != nil {
		c.OnApplied()
	}
	return nil
}

// apply creates the object or updates it when its labels or webhooks
// differ.
func apply(ctx context.Context, cl client.Client, desired client.Object) error {
	current := desired.DeepCopyObject().(client.Object)
	err := cl.Get(ctx, client.ObjectKeyFromObject(desired), current)
	if apierrors.IsNotFound(err) {
		if err := cl.Create(ctx, desired); err != nil {
			return fmt.Errorf("creating %s: %w", desired.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", desired.GetName(), err)
	}
	if !changed(current, desired) {
		return nil
	}
	desired.SetResourceVersion(current.GetResourceVersion())
	if err := cl.Update(ctx, desired); err != nil {
		return fmt.Errorf("updating %s: %w", desired.GetName(), err)
	}
	return nil
}

func changed(current, desired client.Object) bool {
	if current.GetLabels()[ManagedByLabel] != ManagedByValue {
		return true
	}
	switch d := desired.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		return !equality.Semantic.DeepDerivative(d.Webhooks, current.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks) ||
			len(d.Webhooks) != len(current.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks)
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		return !equality.Semantic.DeepDerivative(d.Webhooks, current.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks) ||
			len(d.Webhooks) != len(current.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks)
	}
	return true
}

// Cleanup deletes every webhook configuration charter manages, so a
// stopped charter never leaves a cluster unable to admit anything.
func Cleanup(ctx context.Context, cl client.Client) error {
	sel := client.MatchingLabels{ManagedByLabel: ManagedByValue}
	if err := cl.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}, sel); err != nil {
		return fmt.Errorf("deleting ValidatingWebhookConfigurations: %w", err)
	}
	if err := cl.DeleteAllOf(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{}, sel); err != nil {
		return fmt.Errorf("deleting MutatingWebhookConfigurations: %w", err)
	}
	return nil
}
