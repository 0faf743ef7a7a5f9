// Package status writes the status of every policy from what the
// admission controller's policy cache actually serves, in the shape
// Kyverno gives each kind, so `kubectl get`, Argo CD's built-in health
// checks and other tools that read it keep working:
//
//   - ClusterPolicy and Policy: a Ready condition (True "Succeeded"/"Ready"
//     once the policy is compiled and in force; False "Failed" with the
//     engine's field-path faults when it does not compile; False
//     "Unsupported" naming each field whose feature charter cannot run in
//     the cluster, unsupported.Features), the rules autogen generated
//     for Pod controllers, and the rule counts (admission-reports.md §5).
//   - the policies.kyverno.io kinds: status.conditionStatus, ready only
//     while every condition is True: PolicyCached (False with charter's
//     reason and message while charter cannot serve the policy, absent
//     once it does, as in Kyverno's status), WebhookConfigured (True once
//     the webhook configurations carry the generation; policies never
//     served at admission have none), RBACPermissionsGranted (whether the
//     reports controller may read what the policy matches, see
//     WithReportingAccess); and status.autogen.configs, the copies for
//     Pod controllers.
//
// Status goes through the status subresource and only when it changes:
// the policy's spec, and therefore its generation, is never touched.
package status

import (
	"encoding/json"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/api/conditions"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/unsupported"
)

// MessageReady is the Ready condition's message when the policy serves,
// as Kyverno writes it.
const MessageReady = "Ready"

// Verdict is what the admission controller knows of one policy generation.
type Verdict struct {
	// Ready is true when the policy is compiled and in force.
	Ready bool
	// Generation is the policy generation the verdict is about.
	Generation int64
	// Reason is the Ready condition's reason when the policy is not ready:
	// kyvernov1.PolicyReasonFailed (the default) or
	// kyvernov1.PolicyReasonUnsupported.
	Reason string
	// Message says why the policy is not ready: its faults, or the
	// features charter cannot run.
	Message string
	// Reporting is the RBACPermissionsGranted condition of a
	// policies.kyverno.io policy (WithReportingAccess); nil leaves the
	// condition as it is.
	Reporting *metav1.Condition
}

// Decide returns the verdict on p given the snapshot the policy cache
// serves, and false when the snapshot does not reflect p's generation yet
// (the next snapshot will). p comes from the same informers the cache
// reads, so it is never older than the snapshot.
//
//   - p does not compile: not ready, with the faults of p's own generation.
//   - p is served at its generation: ready.
//   - p has spec.admission: false: never served at admission, ready when it
//     compiles, as Kyverno records such policies.
//   - p compiles but uses a feature charter cannot run in the cluster: not
//     ready, reason Unsupported, naming each field, whether or not its
//     rules enforce (policy admission refuses the enforcing ones; those
//     that got in another way, or only audit, must not look in force).
func Decide(p kyvernov1.PolicyInterface, s *policycache.Snapshot) (Verdict, bool) {
	id := policyid.Of(p)
	gen := p.GetGeneration()
	// The snapshot compiled every installed policy, admission or not; its
	// unit says whether this generation compiles.
	u, ok := s.Compiled(id)
	if !ok || u.Source().GetGeneration() != gen {
		return Verdict{}, false
	}
	if faults := u.Errors(); len(faults) > 0 {
		return Verdict{Generation: gen, Message: faultMessage(faults)}, true
	}
	if !p.GetSpec().AdmissionProcessingEnabled() {
		return unitVerdict(u.Unsupported(), gen), true
	}
	for _, set := range s.Sets() {
		if set == nil {
			continue
		}
		if served, ok := set.Lookup(id); ok && served.Source().GetGeneration() == gen {
			return unitVerdict(served.Unsupported(), gen), true
		}
	}
	return Verdict{}, false
}

// unitVerdict is the verdict on a policy that compiles, given what of it
// charter cannot run: ready, unless it uses features charter cannot run in
// the cluster.
func unitVerdict(found unsupported.List, gen int64) Verdict {
	if inCluster := found.In(unsupported.InCluster); len(inCluster) > 0 {
		return Verdict{Generation: gen, Reason: kyvernov1.PolicyReasonUnsupported, Message: inCluster.Messages()}
	}
	return Verdict{Ready: true, Generation: gen, Message: MessageReady}
}

// faultMessage lists the faults by field path, e.g.
// `spec.rules[0].validate.pattern.spec.containers[0]: unknown anchor "~(x)"`;
// the policy itself needs no naming on its own status.
func faultMessage(faults fault.List) string {
	msgs := make([]string, len(faults))
	for i, f := range faults {
		if f.Field == "" {
			msgs[i] = f.Fault
		} else {
			msgs[i] = f.Field + ": " + f.Fault
		}
	}
	return strings.Join(msgs, "; ")
}

// Desired returns a ClusterPolicy's or Policy's status with the verdict
// applied: the Ready condition (its lastTransitionTime moves only when its
// status flips), the deprecated status.ready cleared as Kyverno does, the
// autogen rules, the rule counts and the admission and background settings
// with their defaults applied. Fields charter does not own
// (validatingadmissionpolicy) are kept.
func Desired(p kyvernov1.StatusHolder, v Verdict) *kyvernov1.PolicyStatus {
	st := p.GetStatus().DeepCopy()
	status, reason := metav1.ConditionTrue, kyvernov1.PolicyReasonSucceeded
	if !v.Ready {
		status, reason = metav1.ConditionFalse, v.reason()
	}
	conditions.Set(&st.Conditions, v.Generation, kyvernov1.PolicyConditionReady, status, reason, v.Message)
	st.Ready = nil
	// The generated rules are published even for a policy that does not
	// compile: its faults may point into status.autogen.rules.
	st.Autogen.Rules, _ = autogen.GeneratedRules(p)
	st.RuleCount = ruleCount(p.GetSpec())
	// What the printer columns show: the spec's setting or its default,
	// never written back into spec.
	admission, background := actsAtAdmission(p), p.GetSpec().BackgroundProcessingEnabled()
	st.Admission, st.Background = &admission, &background
	return st
}

// reason is the reason of a not-ready verdict (default Failed).
func (v Verdict) reason() string {
	if v.Reason != "" {
		return v.Reason
	}
	return kyvernov1.PolicyReasonFailed
}

// MessageWebhookConfigured is Kyverno's message of a True
// WebhookConfigured condition.
const MessageWebhookConfigured = "Webhook configured."

// DesiredPolicyStatus returns a policies.kyverno.io policy's status with
// the verdict applied, in Kyverno's shape: PolicyCached False with
// charter's reason and message while the policy is not served, gone once
// it is (a served policy carries Kyverno's conditions only, which
// Kyverno's own e2e tests count),
// WebhookConfigured is True for a served policy that acts at admission
// (Decide's caller waits for the webhook configurations before a Ready
// verdict) and absent otherwise, so the first False condition Argo CD
// shows is charter's reason. conditionStatus.ready and message summarise
// every condition, including those another controller wrote
// (RBACPermissionsGranted), and status.autogen.configs holds the copies
// for Pod controllers.
func DesiredPolicyStatus(p policiesv1.StatusHolder, v Verdict) *policiesv1.PolicyStatus {
	st := p.GetStatus().DeepCopy()
	cs := &st.ConditionStatus
	if v.Ready {
		conditions.DeleteSummarized(cs, policiesv1.ConditionPolicyCached)
		if p.GetSpec().AdmissionProcessingEnabled() {
			conditions.SetSummarized(cs, v.Generation, policiesv1.ConditionWebhookConfigured, metav1.ConditionTrue,
				policiesv1.ReasonSucceeded, MessageWebhookConfigured)
		} else {
			conditions.DeleteSummarized(cs, policiesv1.ConditionWebhookConfigured)
		}
	} else {
		conditions.SetSummarized(cs, v.Generation, policiesv1.ConditionPolicyCached, metav1.ConditionFalse, v.reason(), v.Message)
		conditions.DeleteSummarized(cs, policiesv1.ConditionWebhookConfigured)
	}
	// The background controller's RBACPermissionsGranted (a forbidden
	// write of a generate or mutate-existing rule, reason Forbidden) says
	// more than reporting access does: it stays until that controller
	// sees the writes go through.
	if v.Reporting != nil {
		if cur := meta.FindStatusCondition(cs.Conditions, policiesv1.ConditionRBACPermissionsGranted); cur == nil || cur.Reason != ReasonForbidden {
			r := v.Reporting
			conditions.SetSummarized(cs, r.ObservedGeneration, r.Type, r.Status, r.Reason, r.Message)
		}
	}
	// A condition another controller wrote (RBACPermissionsGranted: the
	// writes of generate or mutate-existing rules) describes writes that
	// already happened, and stays true of the new generation until that
	// controller sees otherwise. Left at the old generation, Argo CD would
	// wait for it forever ("status to reflect latest generation").
	for i := range cs.Conditions {
		if cs.Conditions[i].ObservedGeneration < v.Generation {
			cs.Conditions[i].ObservedGeneration = v.Generation
		}
	}
	// The copies are published even for a policy that does not compile:
	// its faults may point into status.autogen.
	if configs, err := autogen.Configs(p); err == nil {
		st.Autogen.Configs = configs
	}
	st.Generated = false
	st.Admission, st.Background = nil, nil
	if _, ok := p.(policiesv1.MutatingPolicyLike); ok {
		// The ADMISSION and BACKGROUND columns of MutatingPolicy.
		admission, background := actsAtAdmission(p), p.GetSpec().BackgroundProcessingEnabled()
		st.Admission, st.Background = &admission, &background
	}
	return st
}

// actsAtAdmission is what the ADMISSION column says: whether the policy
// acts on requests at admission. A MutatingPolicy that only mutates
// existing resources is served at admission to see its triggers (in
// ClusterPolicy terms its spec says admission), but it changes nothing
// in the request, so it shows false.
func actsAtAdmission(p kyvernov1.PolicyInterface) bool {
	if m, ok := p.(policiesv1.MutatingPolicyLike); ok {
		return m.GetMutatingPolicySpec().AdmissionEnabled()
	}
	return p.GetSpec().AdmissionProcessingEnabled()
}

// ruleCount counts the spec's rules by type, leaving out autogen-* rules
// that older Kyverno versions wrote into spec.
func ruleCount(spec *kyvernov1.Spec) kyvernov1.RuleCountStatus {
	own := *spec
	own.Rules = nil
	for _, r := range spec.Rules {
		if !autogen.IsGenerated(r.Name) {
			own.Rules = append(own.Rules, r)
		}
	}
	return kyvernov1.CountRules(&own)
}

// Changed reports whether two statuses differ as the API server stores
// them: compared as JSON, so nil and empty lists, or raw patterns that
// came back reformatted, never look like a change and cause a write loop.
func Changed[S kyvernov1.PolicyStatus | policiesv1.PolicyStatus](current, desired *S) bool {
	return !sameJSON(current, desired)
}

func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
