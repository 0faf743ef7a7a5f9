package events

import (
	"iter"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
)

// Admission is the outcome of one validated admission request, turned
// into events on the sink's goroutine (admission-reports.md §3.1).
type Admission struct {
	// Request is what was evaluated.
	Request *engine.Request
	// Responses are the engine's responses, one per policy set.
	Responses []*engine.Response
	// Blocked is true when the request was denied.
	Blocked bool
	// SuccessEvents emits PolicyApplied for policies whose rules all
	// passed (Kyverno's generateSuccessEvents, off by default).
	SuccessEvents bool
}

// Events yields the events of the admission without formatting their
// notes: the sink formats a note only for an event it creates, so the
// events its spam filter holds back or counts into a series cost no text
// (see AdmissionEvents for what is yielded). The Event yielded is reused:
// it is valid during the yield only.
func (a Admission) Events() iter.Seq[*Event] {
	return func(yield func(*Event) bool) {
		var ev Event
		for _, resp := range a.Responses {
			if !a.policyEvents(resp, &ev, yield) {
				return
			}
		}
	}
}

// AdmissionEvents builds Kyverno's admission events for one request. For
// each policy that has rules in the responses:
//
//   - if a rule failed or errored: one PolicyViolation event on the policy
//     per such rule ("Pod default/nginx: [rule] fail (blocked); <message>"),
//     and, when the request was allowed, one PolicyViolation event on the
//     resource per such rule ("policy <policy>/<rule> <status>: <message>").
//     Kyverno also writes a PolicyViolation on the resource for each rule
//     that passed; charter does not, because a Warning saying "violation"
//     about a rule that held is false, and it multiplies the API writes.
//     The action is what happened to the request: "Resource Blocked" when
//     it was denied, "None" when it was let through despite the failure
//     (Kyverno's "Resource Passed" there reads as if the rule passed);
//   - else, if allowed and a rule was skipped by PolicyExceptions: a
//     PolicySkipped event on each exception and one on the policy;
//   - else, with successEvents: PolicyApplied on the policy.
//
// A blocked request answers with its Enforce rules only: Kyverno never
// runs the audit pass of a request it denies, so audit failures of a
// denied request produce no events. Objects without a name (generateName
// before the API server names them) get no events.
//
// The events come with their notes formatted; the sink takes them from
// Admission.Events, which formats none.
func AdmissionEvents(req *engine.Request, responses []*engine.Response, blocked, successEvents bool) []Event {
	var out []Event
	for ev := range (Admission{Request: req, Responses: responses, Blocked: blocked, SuccessEvents: successEvents}).Events() {
		e := *ev
		e.Note, e.text = ev.note(), noteText{}
		if ev.Related != nil {
			related := *ev.Related
			e.Related = &related
		}
		out = append(out, e)
	}
	return out
}

// policyEvents yields, in ev, the events of resp (see AdmissionEvents); it
// returns false when yield asked to stop.
func (a Admission) policyEvents(resp *engine.Response, ev *Event, yield func(*Event) bool) bool {
	res := resp.Resource
	if res.Name == "" {
		return true
	}
	resource := resourceRef(res, objectUID(a.Request))
	for i := range resp.Policies {
		p := &resp.Policies[i]
		if !a.anyRule(p.Rules) {
			continue
		}
		policy := policyRef(p.Policy)
		switch {
		case a.anyViolation(p.Rules):
			action := ActionNone
			if a.Blocked {
				action = ActionResourceBlocked
			}
			for j := range p.Rules {
				r := &p.Rules[j]
				if !a.answers(r) || !isViolation(r.Status) {
					continue
				}
				*ev = Event{Regarding: policy, Related: &resource, Reason: ReasonPolicyViolation, Action: action,
					text: noteText{form: notePolicyViolation, resource: res, rule: r.Name, status: r.Status, message: r.Message, blocked: a.Blocked}}
				if !yield(ev) {
					return false
				}
			}
			if a.Blocked {
				continue
			}
			for j := range p.Rules {
				r := &p.Rules[j]
				if !isViolation(r.Status) {
					continue
				}
				*ev = Event{Regarding: resource, Reason: ReasonPolicyViolation, Action: ActionNone,
					text: noteText{form: noteResourceViolation, policy: p.Policy.GetName(), rule: r.Name, status: r.Status, message: r.Message}}
				if !yield(ev) {
					return false
				}
			}
		case a.anySkipped(p.Rules):
			if a.Blocked {
				continue
			}
			for _, e := range skippedEvents(p, p.Rules, policy, resource, res) {
				*ev = e
				if !yield(ev) {
					return false
				}
			}
		case a.SuccessEvents:
			*ev = Event{Regarding: policy, Related: &resource, Reason: ReasonPolicyApplied, Action: ActionResourcePassed,
				text: noteText{form: notePolicyApplied, resource: res}}
			if !yield(ev) {
				return false
			}
		}
	}
	return true
}

// answers reports whether r is part of the request's answer: a blocked
// request answers with its Enforce rules only.
func (a Admission) answers(r *engine.RuleResponse) bool {
	return !a.Blocked || r.Action == engine.Enforce
}

func (a Admission) anyRule(rules []engine.RuleResponse) bool {
	for i := range rules {
		if a.answers(&rules[i]) {
			return true
		}
	}
	return false
}

func (a Admission) anyViolation(rules []engine.RuleResponse) bool {
	for i := range rules {
		if a.answers(&rules[i]) && isViolation(rules[i].Status) {
			return true
		}
	}
	return false
}

func (a Admission) anySkipped(rules []engine.RuleResponse) bool {
	for i := range rules {
		if a.answers(&rules[i]) && rules[i].Status == engine.StatusSkip {
			return true
		}
	}
	return false
}

// skippedEvents are the PolicySkipped events of the rules that
// PolicyExceptions exempted: one on each exception, one on the policy.
func skippedEvents(p *engine.PolicyResponse, rules []engine.RuleResponse, policy, resource corev1.ObjectReference, res engine.ResourceRef) []Event {
	var out []Event
	for _, r := range rules {
		if r.Status != engine.StatusSkip || len(r.Exceptions) == 0 {
			continue
		}
		keys := make([]string, 0, len(r.Exceptions))
		for _, ex := range r.Exceptions {
			keys = append(keys, ex.Namespace+"/"+ex.Name)
			out = append(out, Event{
				Regarding: corev1.ObjectReference{APIVersion: "kyverno.io/v2", Kind: "PolicyException",
					Namespace: ex.Namespace, Name: ex.Name, UID: ex.UID},
				Related: resource.DeepCopy(), Reason: ReasonPolicySkipped, Action: ActionResourcePassed,
				Note: "resource " + res.String() + " was skipped from policy rule " + p.Key + "/" + r.Name,
			})
		}
		out = append(out, Event{Regarding: policy, Related: resource.DeepCopy(), Reason: ReasonPolicySkipped,
			Action: ActionResourcePassed,
			Note:   "resource " + res.String() + " was skipped from rule " + r.Name + " due to policy exceptions " + strings.Join(keys, ", ")})
	}
	return out
}

// isViolation: a warn is the fail of an unscored policy, still a
// violation (Kyverno's engine says fail; only its reports say warn).
func isViolation(s engine.RuleStatus) bool {
	return s == engine.StatusFail || s == engine.StatusError || s == engine.StatusWarn
}

// eventStatus is the status as Kyverno's engine names it in event notes.
func eventStatus(s engine.RuleStatus) string {
	if s == engine.StatusWarn {
		return string(engine.StatusFail)
	}
	return string(s)
}

// policyNoteResource is "<Kind> <ns>/<name>", or "<Kind> <name>" for a
// cluster-scoped resource.
func policyNoteResource(r engine.ResourceRef) string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// policyAPIVersion is kyverno.io/v1, worked out once: GroupVersion.String
// allocates it on every call.
var policyAPIVersion = kyvernov1.GroupVersion.String()

// celPolicyAPIVersion is the version Kyverno's events name a
// policies.kyverno.io policy in (its e2e tests assert it), whatever
// version the policy was written in.
const celPolicyAPIVersion = policiesv1.Group + "/v1beta1"

// policyRef is the reference Kyverno's events use for a policy: kind from
// the Go type, as informers' objects carry no TypeMeta: ClusterPolicy or
// Policy of kyverno.io/v1, or the policies.kyverno.io kind
// (ValidatingPolicy, NamespacedMutatingPolicy, ...).
func policyRef(p kyvernov1.PolicyInterface) corev1.ObjectReference {
	apiVersion, kind := policyAPIVersion, kyvernov1.ClusterPolicyKind
	switch k := p.GetKind(); {
	case k != "" && k != kyvernov1.ClusterPolicyKind && k != kyvernov1.PolicyKind:
		apiVersion, kind = celPolicyAPIVersion, k
	case p.IsNamespaced():
		kind = kyvernov1.PolicyKind
	}
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind,
		Namespace: p.GetNamespace(), Name: p.GetName(), UID: p.GetUID()}
}

func resourceRef(r engine.ResourceRef, uid types.UID) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: uid}
}

// objectUID is the UID of the request's object (the old one on DELETE).
func objectUID(req *engine.Request) types.UID {
	if req == nil {
		return ""
	}
	obj := req.Object
	if obj == nil {
		obj = req.OldObject
	}
	meta, _ := obj["metadata"].(map[string]any)
	uid, _ := meta["uid"].(string)
	return types.UID(uid)
}
