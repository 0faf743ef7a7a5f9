package status

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/webhookrules"
)

// Kyverno's messages of RBACPermissionsGranted on the policies.kyverno.io
// kinds: whether the reports controller may get, list and watch every
// resource the policy matches, so that it can report on them.
const (
	MessageReadyForReporting   = "Policy is ready for reporting."
	messageMissingPermissions  = "Policy is not ready for reporting, missing permissions: "
	reportingAccessCacheWindow = 30 * time.Second
)

// reportingVerbs are the verbs a background scan needs on a matched
// resource, in the order Kyverno names them.
var reportingVerbs = []string{"get", "list", "watch"}

// ReportingAccess answers whether charter's reports controller may do
// what attrs say; reason is the authorizer's, often empty.
type ReportingAccess interface {
	Allowed(ctx context.Context, attrs authorizationv1.ResourceAttributes) (allowed bool, reason string, err error)
}

// WithReportingAccess makes the controller write Kyverno's
// RBACPermissionsGranted condition on ValidatingPolicy, ImageValidatingPolicy,
// MutatingPolicy, GeneratingPolicy and their Namespaced forms: True
// ("Policy is ready for reporting.") when the reports controller may get,
// list and watch every resource of the policy's matchConstraints, False
// naming each verb and resource it may not.
func WithReportingAccess(a ReportingAccess) Option {
	return func(c *Controller) {
		if a != nil {
			c.reporting = newCachedAccess(a, reportingAccessCacheWindow)
		}
	}
}

// SubjectAccess asks the API server with a SubjectAccessReview what a user
// (the reports controller's ServiceAccount, when it runs in another
// Deployment) may do.
type SubjectAccess struct {
	Client authorizationclient.SubjectAccessReviewsGetter
	User   string
	Groups []string
}

// Allowed implements ReportingAccess.
func (s SubjectAccess) Allowed(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: s.User, Groups: s.Groups, ResourceAttributes: &attrs}}
	got, err := s.Client.SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("asking whether %s may %s %s: %w", s.User, attrs.Verb, attrs.Resource, err)
	}
	return got.Status.Allowed, got.Status.Reason, nil
}

// SelfAccess asks with a SelfSubjectAccessReview what this process may do:
// the reports controller's identity when it runs here too.
type SelfAccess struct {
	Client authorizationclient.SelfSubjectAccessReviewsGetter
}

// Allowed implements ReportingAccess.
func (s SelfAccess) Allowed(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	got, err := s.Client.SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("asking whether charter may %s %s: %w", attrs.Verb, attrs.Resource, err)
	}
	return got.Status.Allowed, got.Status.Reason, nil
}

// cachedAccess keeps each answer for a while: every resync reconciles
// every policy, and most policies match the same few resources.
type cachedAccess struct {
	next   ReportingAccess
	window time.Duration
	now    func() time.Time
	mu     sync.Mutex
	seen   map[authorizationv1.ResourceAttributes]cachedAnswer
}

type cachedAnswer struct {
	allowed bool
	reason  string
	at      time.Time
}

// Cached keeps each of a's answers as long as the policy status
// controller keeps them: what policy admission asks of the reports
// controller for each policy written (policycheck.ReadWarnings), a
// handful of SubjectAccessReviews per kind, is asked again for most
// policies.
func Cached(a ReportingAccess) ReportingAccess {
	return newCachedAccess(a, reportingAccessCacheWindow)
}

func newCachedAccess(next ReportingAccess, window time.Duration) *cachedAccess {
	return &cachedAccess{next: next, window: window, now: time.Now, seen: map[authorizationv1.ResourceAttributes]cachedAnswer{}}
}

func (c *cachedAccess) Allowed(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	c.mu.Lock()
	a, ok := c.seen[attrs]
	c.mu.Unlock()
	if ok && c.now().Sub(a.at) < c.window {
		return a.allowed, a.reason, nil
	}
	allowed, reason, err := c.next.Allowed(ctx, attrs)
	if err != nil {
		return false, "", err
	}
	c.mu.Lock()
	c.seen[attrs] = cachedAnswer{allowed: allowed, reason: reason, at: c.now()}
	c.mu.Unlock()
	return allowed, reason, nil
}

// reportingCondition is the RBACPermissionsGranted condition of a
// policies.kyverno.io policy, as Kyverno words it; false when the kind is
// never reported on.
func reportingCondition(ctx context.Context, p kyvernov1.PolicyInterface, access ReportingAccess, generation int64) (metav1.Condition, bool, error) {
	rules, ok := reportedResourceRules(p)
	if !ok {
		return metav1.Condition{}, false, nil
	}
	var missing []string
	for _, r := range rules {
		for _, group := range r.APIGroups {
			for _, version := range r.APIVersions {
				for _, resource := range r.Resources {
					res, sub, _ := strings.Cut(resource, "/")
					gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
					for _, verb := range reportingVerbs {
						allowed, reason, err := access.Allowed(ctx, authorizationv1.ResourceAttributes{
							Verb: verb, Group: group, Version: version, Resource: res, Subresource: sub})
						if err != nil {
							return metav1.Condition{}, false, err
						}
						if !allowed {
							missing = append(missing, fmt.Sprintf("%s %s: %s", verb, gvr, reason))
						}
					}
				}
			}
		}
	}
	c := metav1.Condition{Type: policiesv1.ConditionRBACPermissionsGranted, Status: metav1.ConditionTrue,
		Reason: policiesv1.ReasonSucceeded, Message: MessageReadyForReporting, ObservedGeneration: generation}
	if len(missing) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, policiesv1.ReasonFailed
		c.Message = messageMissingPermissions + strings.Join(missing, "; ") + "."
	}
	return c, true, nil
}

// reportedResourceRules are the resource rules of the policy's
// matchConstraints; false for the kinds Kyverno does not report on.
func reportedResourceRules(p kyvernov1.PolicyInterface) ([]admissionregistrationv1.NamedRuleWithOperations, bool) {
	mc, ok := webhookrules.MatchConstraints(p)
	if !ok {
		return nil, false
	}
	if mc == nil {
		return nil, true
	}
	return mc.ResourceRules, true
}
