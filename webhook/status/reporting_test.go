package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/api/conditions"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// grants answers from a set of "verb group/resource" it allows, counting
// the questions.
type grants struct {
	allowed map[string]bool
	asked   int
	err     error
}

func (g *grants) Allowed(_ context.Context, a authorizationv1.ResourceAttributes) (bool, string, error) {
	g.asked++
	if g.err != nil {
		return false, "", g.err
	}
	return g.allowed[a.Verb+" "+a.Group+"/"+a.Resource], "", nil
}

// TestDesiredPolicyStatusReportingCondition: the reporting verdict is
// written as RBACPermissionsGranted and counts toward ready, except that
// the background controller's Forbidden (a generate write RBAC refused)
// stays until that controller clears it.
func TestDesiredPolicyStatusReportingCondition(t *testing.T) {
	p := load(t, "vpol-pods.yaml").(policiesv1.StatusHolder)
	ok := &metav1.Condition{Type: policiesv1.ConditionRBACPermissionsGranted, Status: metav1.ConditionTrue,
		Reason: policiesv1.ReasonSucceeded, Message: MessageReadyForReporting, ObservedGeneration: 2}
	st := DesiredPolicyStatus(p, Verdict{Ready: true, Generation: 2, Reporting: ok})
	if c := meta.FindStatusCondition(st.ConditionStatus.Conditions, policiesv1.ConditionRBACPermissionsGranted); c == nil || c.Message != MessageReadyForReporting {
		t.Fatalf("RBACPermissionsGranted = %+v", c)
	}
	if !st.ConditionStatus.IsReady() {
		t.Errorf("ready false with every condition True: %+v", st.ConditionStatus)
	}

	missing := *ok
	missing.Status, missing.Reason, missing.Message = metav1.ConditionFalse, policiesv1.ReasonFailed, "Policy is not ready for reporting, missing permissions: get /v1, Resource=secrets: ."
	st = DesiredPolicyStatus(p, Verdict{Ready: true, Generation: 2, Reporting: &missing})
	if st.ConditionStatus.IsReady() || st.ConditionStatus.Message != missing.Message {
		t.Errorf("missing permissions: ready %v, message %q", st.ConditionStatus.IsReady(), st.ConditionStatus.Message)
	}

	forbidden := metav1.Condition{Type: policiesv1.ConditionRBACPermissionsGranted, Status: metav1.ConditionFalse,
		Reason: ReasonForbidden, Message: "create configmaps in ns-a: forbidden", ObservedGeneration: 2}
	conditions.SetSummarized(&p.GetStatus().ConditionStatus, 2, forbidden.Type, forbidden.Status, forbidden.Reason, forbidden.Message)
	st = DesiredPolicyStatus(p, Verdict{Ready: true, Generation: 2, Reporting: ok})
	if c := meta.FindStatusCondition(st.ConditionStatus.Conditions, policiesv1.ConditionRBACPermissionsGranted); c == nil || c.Reason != ReasonForbidden {
		t.Errorf("the background controller's Forbidden was replaced: %+v", c)
	}
}

// TestReportingConditionChecksEveryMatchedResource: get, list and watch
// of every group, version and resource of matchConstraints; a kind
// without conditionStatus (ClusterPolicy) gets no condition; an
// error of the authorizer is the caller's, not a False condition.
func TestReportingConditionChecksEveryMatchedResource(t *testing.T) {
	g := &grants{allowed: map[string]bool{"get /pods": true, "list /pods": true, "watch /pods": true}}
	p := load(t, "vpol-pods-and-core-deployments.yaml")
	cond, ok, err := reportingCondition(context.Background(), p, g, 1)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if g.asked != 6 || cond.Status != metav1.ConditionFalse || strings.Count(cond.Message, "Resource=deployments") != 3 || strings.Contains(cond.Message, "pods") {
		t.Errorf("asked %d, condition %+v", g.asked, cond)
	}

	g.err = errors.New("connection refused")
	if _, _, err := reportingCondition(context.Background(), p, g, 1); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("authorizer error: %v", err)
	}

	if _, ok, err := reportingCondition(context.Background(), load(t, "require-labels.yaml"), g, 1); ok || err != nil {
		t.Errorf("a ClusterPolicy got a reporting condition (%v, %v)", ok, err)
	}
}

// TestCachedAccessKeepsAnswersForItsWindow: one question per resource
// and verb within the window, asked again after it.
func TestCachedAccessKeepsAnswersForItsWindow(t *testing.T) {
	g := &grants{allowed: map[string]bool{"list /pods": true}}
	c := newCachedAccess(g, time.Minute)
	now := time.Unix(0, 0)
	c.now = func() time.Time { return now }
	attrs := authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "pods"}
	for range 3 {
		if allowed, _, err := c.Allowed(context.Background(), attrs); err != nil || !allowed {
			t.Fatal(allowed, err)
		}
	}
	if g.asked != 1 {
		t.Errorf("asked %d times within the window, want 1", g.asked)
	}
	now = now.Add(time.Minute)
	g.allowed["list /pods"] = false
	if allowed, _, _ := c.Allowed(context.Background(), attrs); allowed || g.asked != 2 {
		t.Errorf("after the window: allowed %v, asked %d", allowed, g.asked)
	}
}
