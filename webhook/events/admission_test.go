package events

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
)

var (
	clusterPolicy = &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "require-labels", UID: "cpol-uid"}}
	nsPolicy      = &kyvernov1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "team-rules", Namespace: "team", UID: "pol-uid"}}
	vpol          = &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "check-labels", UID: "vpol-uid"}}
	nmpol         = &policiesv1.NamespacedMutatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-mutations", Namespace: "team", UID: "nmpol-uid"}}
	exception     = &kyvernov2.PolicyException{ObjectMeta: metav1.ObjectMeta{Name: "let-nginx", Namespace: "exceptions", UID: "ex-uid"}}

	podRef     = engine.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "nginx"}
	podRequest = &engine.Request{Object: map[string]any{"metadata": map[string]any{"name": "nginx", "uid": "pod-uid"}}}

	cpolRef = corev1.ObjectReference{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "require-labels", UID: "cpol-uid"}
	polRef  = corev1.ObjectReference{APIVersion: "kyverno.io/v1", Kind: "Policy", Namespace: "team", Name: "team-rules", UID: "pol-uid"}
	podObj  = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "nginx", UID: "pod-uid"}
)

func fail(name, msg string, action engine.Action) engine.RuleResponse {
	return engine.RuleResponse{Name: name, Type: engine.TypeValidation, Status: engine.StatusFail, Message: msg, Action: action}
}

func pass(name string, action engine.Action) engine.RuleResponse {
	return engine.RuleResponse{Name: name, Type: engine.TypeValidation, Status: engine.StatusPass,
		Message: "validation rule '" + name + "' passed.", Action: action}
}

func response(res engine.ResourceRef, policies ...engine.PolicyResponse) []*engine.Response {
	return []*engine.Response{{Resource: res, Policies: policies}}
}

func related(r corev1.ObjectReference) *corev1.ObjectReference { return &r }

func TestAdmissionEvents(t *testing.T) {
	labelsFail := fail("check-for-labels", "validation error: label required. rule check-for-labels failed at path /metadata/labels/", engine.Enforce)
	tests := []struct {
		name          string
		req           *engine.Request
		responses     []*engine.Response
		blocked       bool
		successEvents bool
		want          []Event
	}{{
		name:    "Enforce denial: one blocked event on the policy, none on the resource",
		req:     podRequest,
		blocked: true,
		responses: response(podRef, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels",
			Rules: []engine.RuleResponse{labelsFail, pass("check-team", engine.Enforce), fail("audit-only", "validation error: x", engine.Audit)}}),
		want: []Event{{
			Regarding: cpolRef, Related: related(podObj), Reason: ReasonPolicyViolation, Action: ActionResourceBlocked,
			Note: "Pod default/nginx: [check-for-labels] fail (blocked); validation error: label required. rule check-for-labels failed at path /metadata/labels/",
		}},
	}, {
		name:    "a denied request's audit failures give no events",
		req:     podRequest,
		blocked: true,
		responses: response(podRef,
			engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels", Rules: []engine.RuleResponse{labelsFail}},
			engine.PolicyResponse{Policy: nsPolicy, Key: "team/team-rules", Rules: []engine.RuleResponse{fail("audit", "validation error: y", engine.Audit)}}),
		want: []Event{{
			Regarding: cpolRef, Related: related(podObj), Reason: ReasonPolicyViolation, Action: ActionResourceBlocked,
			Note: "Pod default/nginx: [check-for-labels] fail (blocked); validation error: label required. rule check-for-labels failed at path /metadata/labels/",
		}},
	}, {
		name: "Audit failure: one event on the policy and one on the resource per failing rule, none for rules that passed",
		req:  podRequest,
		responses: response(podRef, engine.PolicyResponse{Policy: nsPolicy, Key: "team/team-rules",
			Rules: []engine.RuleResponse{pass("a", engine.Audit), fail("b", "validation error: b. rule b failed at path /spec/", engine.Audit),
				pass("c", engine.Audit), fail("d", "validation error: d", engine.Audit)}}),
		want: []Event{{
			Regarding: polRef, Related: related(podObj), Reason: ReasonPolicyViolation, Action: ActionNone,
			Note: "Pod default/nginx: [b] fail; validation error: b. rule b failed at path /spec/",
		}, {
			Regarding: polRef, Related: related(podObj), Reason: ReasonPolicyViolation, Action: ActionNone,
			Note: "Pod default/nginx: [d] fail; validation error: d",
		}, {
			Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionNone,
			Note: "policy team-rules/b fail: validation error: b. rule b failed at path /spec/",
		}, {
			Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionNone,
			Note: "policy team-rules/d fail: validation error: d",
		}},
	}, {
		name: "an error under failurePolicy Ignore is a violation; an unscored warn reads fail",
		req:  podRequest,
		responses: response(podRef, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels", Rules: []engine.RuleResponse{
			{Name: "ctx", Status: engine.StatusError, Message: "failed to load context: boom", Action: engine.Enforce},
			{Name: "unscored", Status: engine.StatusWarn, Message: "validation error: w", Action: engine.Audit},
		}}),
		want: []Event{
			{Regarding: cpolRef, Related: related(podObj), Reason: ReasonPolicyViolation, Action: ActionNone,
				Note: "Pod default/nginx: [ctx] error; failed to load context: boom"},
			{Regarding: cpolRef, Related: related(podObj), Reason: ReasonPolicyViolation, Action: ActionNone,
				Note: "Pod default/nginx: [unscored] fail; validation error: w"},
			{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionNone,
				Note: "policy require-labels/ctx error: failed to load context: boom"},
			{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionNone,
				Note: "policy require-labels/unscored fail: validation error: w"},
		},
	}, {
		name: "a policies.kyverno.io policy is named by its own kind, in the version Kyverno's events use",
		req:  podRequest,
		responses: response(podRef,
			engine.PolicyResponse{Policy: vpol, Key: "check-labels", Rules: []engine.RuleResponse{fail("check-labels", "labels required", engine.Audit)}},
			engine.PolicyResponse{Policy: nmpol, Key: "team/team-mutations", Rules: []engine.RuleResponse{fail("m", "cannot mutate", engine.Audit)}}),
		want: []Event{{
			Regarding: corev1.ObjectReference{APIVersion: "policies.kyverno.io/v1beta1", Kind: "ValidatingPolicy", Name: "check-labels", UID: "vpol-uid"},
			Related:   related(podObj), Reason: ReasonPolicyViolation, Action: ActionNone,
			Note: "Pod default/nginx: [check-labels] fail; labels required",
		}, {
			Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionNone,
			Note: "policy check-labels/check-labels fail: labels required",
		}, {
			Regarding: corev1.ObjectReference{APIVersion: "policies.kyverno.io/v1beta1", Kind: "NamespacedMutatingPolicy", Namespace: "team", Name: "team-mutations", UID: "nmpol-uid"},
			Related:   related(podObj), Reason: ReasonPolicyViolation, Action: ActionNone,
			Note: "Pod default/nginx: [m] fail; cannot mutate",
		}, {
			Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionNone,
			Note: "policy team-mutations/m fail: cannot mutate",
		}},
	}, {
		name: "a cluster-scoped resource: no namespace in the note",
		req:  &engine.Request{Object: map[string]any{"metadata": map[string]any{"name": "ns1", "uid": "ns-uid"}}},
		responses: response(engine.ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: "ns1"},
			engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels", Rules: []engine.RuleResponse{labelsFail}}),
		blocked: true,
		want: []Event{{
			Regarding: cpolRef, Related: related(corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "ns1", UID: "ns-uid"}),
			Reason: ReasonPolicyViolation, Action: ActionResourceBlocked,
			Note: "Namespace ns1: [check-for-labels] fail (blocked); validation error: label required. rule check-for-labels failed at path /metadata/labels/",
		}},
	}, {
		name: "skipped by an exception: PolicySkipped on the exception and on the policy",
		req:  podRequest,
		responses: response(podRef, engine.PolicyResponse{Policy: nsPolicy, Key: "team/team-rules", Rules: []engine.RuleResponse{
			pass("a", engine.Audit),
			{Name: "b", Status: engine.StatusSkip, Message: "rule is skipped due to policy exceptionsexceptions/let-nginx",
				Exceptions: []*kyvernov2.PolicyException{exception}},
		}}),
		want: []Event{{
			Regarding: corev1.ObjectReference{APIVersion: "kyverno.io/v2", Kind: "PolicyException", Namespace: "exceptions", Name: "let-nginx", UID: "ex-uid"},
			Related:   related(podObj), Reason: ReasonPolicySkipped, Action: ActionResourcePassed,
			Note: "resource Pod/default/nginx was skipped from policy rule team/team-rules/b",
		}, {
			Regarding: polRef, Related: related(podObj), Reason: ReasonPolicySkipped, Action: ActionResourcePassed,
			Note: "resource Pod/default/nginx was skipped from rule b due to policy exceptions exceptions/let-nginx",
		}},
	}, {
		name:      "all passed: nothing unless success events are on",
		req:       podRequest,
		responses: response(podRef, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels", Rules: []engine.RuleResponse{pass("a", engine.Enforce)}}),
	}, {
		name:          "all passed with success events: PolicyApplied on the policy",
		req:           podRequest,
		successEvents: true,
		responses:     response(podRef, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels", Rules: []engine.RuleResponse{pass("a", engine.Enforce)}}),
		want: []Event{{Regarding: cpolRef, Related: related(podObj), Reason: ReasonPolicyApplied, Action: ActionResourcePassed,
			Note: "Pod default/nginx: pass"}},
	}, {
		name:      "an object without a name gets no events",
		req:       &engine.Request{Object: map[string]any{"metadata": map[string]any{"generateName": "web-"}}},
		responses: response(engine.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: "default"}, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels", Rules: []engine.RuleResponse{labelsFail}}),
		blocked:   true,
	}, {
		name:      "DELETE: the old object's UID",
		req:       &engine.Request{OldObject: map[string]any{"metadata": map[string]any{"name": "nginx", "uid": "old-uid"}}},
		blocked:   true,
		responses: response(podRef, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels", Rules: []engine.RuleResponse{labelsFail}}),
		want: []Event{{
			Regarding: cpolRef, Related: related(corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "nginx", UID: "old-uid"}),
			Reason: ReasonPolicyViolation, Action: ActionResourceBlocked,
			Note: "Pod default/nginx: [check-for-labels] fail (blocked); validation error: label required. rule check-for-labels failed at path /metadata/labels/",
		}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AdmissionEvents(tc.req, tc.responses, tc.blocked, tc.successEvents)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events, want %d:\n%+v", len(got), len(tc.want), got)
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tc.want[i]) {
					t.Errorf("event %d:\n got %+v\nwant %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestEventType(t *testing.T) {
	for reason, want := range map[string]string{
		ReasonPolicyViolation: corev1.EventTypeWarning,
		ReasonPolicyError:     corev1.EventTypeWarning,
		ReasonPolicyApplied:   corev1.EventTypeNormal,
		ReasonPolicySkipped:   corev1.EventTypeNormal,
	} {
		e := Event{Reason: reason}
		if got := e.Type(); got != want {
			t.Errorf("%s: type %s, want %s", reason, got, want)
		}
	}
}
