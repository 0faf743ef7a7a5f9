package report

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/engine"
)

func isGeneratingPolicy(p kyvernov1.PolicyInterface) bool {
	_, ok := p.(policiesv1.GeneratingPolicyLike)
	return ok
}

func isMutatingPolicy(p kyvernov1.PolicyInterface) bool {
	_, ok := p.(policiesv1.MutatingPolicyLike)
	return ok
}

// backgroundResult is the one result of a GeneratingPolicy's response, or
// of a MutatingPolicy's mutate-existing responses (one per target), for a
// trigger; ok is false for any other response.
//
// A GeneratingPolicy's result is its rule's, with generated-resources
// naming what it generated ("<GVK> Name=<n>[ Namespace=<ns>]" joined by
// "; ", as Kyverno writes it); process is always "admission review", as
// in Kyverno. A MutatingPolicy's targets are folded into one result, since
// results of a policy collide on a resource (merge key source/policy): an
// error if any target errs, else pass if any target passed, else skip,
// with patched-target naming every target that was patched. (Kyverno
// writes a result per target, of which the report keeps one.) Its
// process is "background scan" when the policy's background is enabled,
// "admission review" otherwise, as Kyverno derives it.
func backgroundResult(pr *engine.PolicyResponse, allowed AllowedResults, scored bool, ann map[string]string, ts metav1.Timestamp) (v1alpha2.PolicyReportResult, bool) {
	switch {
	case isGeneratingPolicy(pr.Policy):
		for j := range pr.Rules {
			rr := &pr.Rules[j]
			if rr.Type != engine.TypeGeneration || !allowed.Allows(rr.Status) {
				continue
			}
			r := result(pr.Key, pr.Policy, rr, rr.Status, scored, ann, ProcessAdmission, ts)
			if len(rr.Generated) > 0 {
				names := make([]string, 0, len(rr.Generated))
				for _, g := range rr.Generated {
					names = append(names, resourceInfo(g.Object))
				}
				r.Properties[PropertyGeneratedResources] = strings.Join(names, "; ")
			}
			return r, true
		}
	case isMutatingPolicy(pr.Policy):
		var folded *engine.RuleResponse
		var patched []string
		for j := range pr.Rules {
			rr := &pr.Rules[j]
			if rr.Type != engine.TypeMutation || rr.Target == nil {
				continue
			}
			if rr.PatchedTarget != nil {
				patched = append(patched, resourceInfo(rr.PatchedTarget))
			}
			if folded == nil || statusRank(rr.Status) > statusRank(folded.Status) {
				folded = rr
			}
		}
		if folded == nil || !allowed.Allows(folded.Status) {
			return v1alpha2.PolicyReportResult{}, false
		}
		one := *folded
		one.Name = ""
		if folded.Status == engine.StatusError && folded.Target != nil {
			one.Message = folded.Target.Kind + " " + objectName(folded.Target.Namespace, folded.Target.Name) + ": " + folded.Message
		}
		process := ProcessAdmission
		if pr.Policy.GetSpec().BackgroundProcessingEnabled() {
			process = ProcessBackground
		}
		r := result(pr.Key, pr.Policy, &one, one.Status, scored, ann, process, ts)
		if len(patched) > 0 {
			r.Properties[PropertyPatchedTarget] = strings.Join(patched, "; ")
		}
		return r, true
	}
	return v1alpha2.PolicyReportResult{}, false
}

// later reports whether timestamp a is strictly after b. Results of
// kyverno.io policies and validating CEL policies carry whole seconds, as
// Kyverno writes them, so they compare as Kyverno compares them; the
// background controller's results carry nanoseconds too, so that of two
// runs for one trigger in the same second (a policy edit right after a
// run) the later one wins.
func later(a, b metav1.Timestamp) bool {
	return a.Seconds > b.Seconds || (a.Seconds == b.Seconds && a.Nanos > b.Nanos)
}

// statusRank orders the outcomes folded into one result.
func statusRank(s engine.RuleStatus) int {
	switch s {
	case engine.StatusError:
		return 3
	case engine.StatusFail, engine.StatusWarn:
		return 2
	case engine.StatusPass:
		return 1
	}
	return 0
}

// resourceInfo names an object as Kyverno's report properties do:
// "<group/version, Kind=kind> Name=<name>[ Namespace=<namespace>]".
func resourceInfo(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
	info := gv.WithKind(u.GetKind()).String() + " Name=" + u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		info += " Namespace=" + ns
	}
	return info
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
