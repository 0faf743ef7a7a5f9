package report

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/engine"
)

// Source is the `source` of the results charter writes for kyverno.io
// policies.
const Source = "charter"

// The `source` of the results of this group's policies, as Kyverno
// writes it (policiesv1.ReportSource).
const (
	SourceValidatingPolicy      = policiesv1.ReportSourceValidatingPolicy
	SourceImageValidatingPolicy = policiesv1.ReportSourceImageValidatingPolicy
	SourceMutatingPolicy        = policiesv1.ReportSourceMutatingPolicy
	SourceGeneratingPolicy      = policiesv1.ReportSourceGeneratingPolicy
)

// SourceOf is the `source` of a policy's results: each kind has its own,
// which keeps apart the results of policies of one name.
func SourceOf(p kyvernov1.PolicyInterface) string {
	if s := policiesv1.ReportSource(p.GetKind()); s != "" {
		return s
	}
	return Source
}

// ChartersSource reports whether charter writes results of this source.
func ChartersSource(s string) bool {
	switch s {
	case Source, SourceValidatingPolicy, SourceImageValidatingPolicy, SourceMutatingPolicy, SourceGeneratingPolicy:
		return true
	}
	return false
}

// Properties of the background controller's results
// (cel-policy-types.md §7).
const (
	// PropertyPatchedTarget names the targets a MutatingPolicy's
	// mutate-existing run patched.
	PropertyPatchedTarget = "patched-target"
	// PropertyGeneratedResources names the objects a GeneratingPolicy
	// generated.
	PropertyGeneratedResources = "generated-resources"
)

// Policy annotations that feed result fields.
const (
	SeverityAnnotation = "policies.kyverno.io/severity"
	CategoryAnnotation = "policies.kyverno.io/category"
)

// Values of the `process` property: the path that produced the result.
// Kyverno's ValidatingPolicy results say so; for kyverno.io policies
// Kyverno derives it from the policy's configuration instead (§6.2), so
// an admission result of a default policy reads "background scan".
// charter says where every result came from.
const (
	ProcessBackground = "background scan"
	ProcessAdmission  = "admission review"
	// processProperty is the property that holds them.
	processProperty = "process"
)

// AllowedResults is the set of engine outcomes kept in reports
// (--allowed-results). The zero value keeps everything.
type AllowedResults map[engine.RuleStatus]bool

// ParseAllowedResults parses a comma-separated list of outcomes
// ("fail,warn,error"). An empty string allows every outcome.
func ParseAllowedResults(s string) (AllowedResults, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	allowed := AllowedResults{}
	for _, tok := range strings.Split(s, ",") {
		st := engine.RuleStatus(strings.TrimSpace(tok))
		switch st {
		case engine.StatusPass, engine.StatusFail, engine.StatusWarn, engine.StatusError, engine.StatusSkip:
			allowed[st] = true
		default:
			return nil, fmt.Errorf("allowed results: unknown result %q, want pass, fail, warn, error or skip", tok)
		}
	}
	return allowed, nil
}

// Allows reports whether an outcome is kept.
func (a AllowedResults) Allows(st engine.RuleStatus) bool { return len(a) == 0 || a[st] }

// String lists the allowed outcomes, "" when all are.
func (a AllowedResults) String() string {
	var out []string
	for st := range a {
		out = append(out, string(st))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Results converts the rule responses of validate and verifyImages rules
// into report results produced by process (ProcessAdmission or
// ProcessBackground), stamped with now. Outcomes that allowed does not
// keep are left out; as in Kyverno the filter sees the engine's outcome
// before an unscored policy's fail is shown as warn.
//
// The background controller's responses for a trigger become results
// too: a GeneratingPolicy's (rule = the policy's name, with
// generated-resources) and a MutatingPolicy's mutate-existing run (rule
// "", with patched-target), whose process is Kyverno's for those kinds
// whatever process says.
func Results(policies []engine.PolicyResponse, allowed AllowedResults, process string, now time.Time) []v1alpha2.PolicyReportResult {
	// Room for the results up front: grown by append, the slice of a Pod
	// review's two dozen results was copied five times over (the
	// admission process converts every admission's responses).
	var out []v1alpha2.PolicyReportResult
	if n := resultsUpTo(policies, allowed); n > 0 {
		out = make([]v1alpha2.PolicyReportResult, 0, n)
	}
	ts := metav1.Timestamp{Seconds: now.Unix()}
	for i := range policies {
		pr := &policies[i]
		if pr.Policy == nil {
			continue
		}
		ann := pr.Policy.GetAnnotations()
		scored := ann[kyvernov1.AnnotationPolicyScored] != "false"
		if r, ok := backgroundResult(pr, allowed, scored, ann, metav1.Timestamp{Seconds: now.Unix(), Nanos: int32(now.Nanosecond())}); ok {
			out = append(out, r)
			continue
		}
		for j := range pr.Rules {
			rr := &pr.Rules[j]
			engineStatus, keep := ruleResult(rr, scored, allowed)
			if !keep {
				continue
			}
			out = append(out, result(pr.Key, pr.Policy, rr, engineStatus, scored, ann, process, ts))
		}
	}
	Sort(out)
	return out
}

// ruleResult is the outcome of a rule as the engine gave it, before an
// unscored policy's fail was shown as warn, and whether it is reported:
// validate and verifyImages rules whose outcome allowed keeps.
func ruleResult(rr *engine.RuleResponse, scored bool, allowed AllowedResults) (engine.RuleStatus, bool) {
	if rr.Type != engine.TypeValidation && rr.Type != engine.TypeImageVerify {
		return "", false
	}
	engineStatus := rr.Status
	if !scored && engineStatus == engine.StatusWarn {
		// The engine already turned this policy's fail into warn.
		engineStatus = engine.StatusFail
	}
	return engineStatus, allowed.Allows(engineStatus)
}

// Reportable reports whether Results may make a result of policies: a
// rule result it keeps, or a GeneratingPolicy or MutatingPolicy, whose
// result may be a background one. It makes none, so the admission writer
// learns cheaply whether an admission it cannot hold had results to drop.
func Reportable(policies []engine.PolicyResponse, allowed AllowedResults) bool {
	return resultsUpTo(policies, allowed) > 0
}

// resultsUpTo is how many results Results makes of policies at most:
// each rule result it keeps, and one for a GeneratingPolicy or
// MutatingPolicy, which may be a background result instead.
func resultsUpTo(policies []engine.PolicyResponse, allowed AllowedResults) int {
	n := 0
	for i := range policies {
		pr := &policies[i]
		if pr.Policy == nil {
			continue
		}
		scored := pr.Policy.GetAnnotations()[kyvernov1.AnnotationPolicyScored] != "false"
		rules := 0
		for j := range pr.Rules {
			if _, keep := ruleResult(&pr.Rules[j], scored, allowed); keep {
				rules++
			}
		}
		if isGeneratingPolicy(pr.Policy) || isMutatingPolicy(pr.Policy) {
			rules = max(rules, 1)
		}
		n += rules
	}
	return n
}

func result(key string, policy kyvernov1.PolicyInterface, rr *engine.RuleResponse, engineStatus engine.RuleStatus, scored bool, ann map[string]string, process string, ts metav1.Timestamp) v1alpha2.PolicyReportResult {
	props := make(map[string]string, len(rr.Properties)+2)
	for k, v := range rr.Properties {
		props[k] = v
	}
	props[processProperty] = process
	if len(rr.Exceptions) > 0 {
		names := make([]string, len(rr.Exceptions))
		for i, ex := range rr.Exceptions {
			names[i] = ex.GetName()
		}
		props["exceptions"] = strings.Join(names, ",")
	}
	// reportProperties override the message: "<outcome>Message" for the
	// engine's outcome, "message" for any outcome.
	msg := rr.Message
	if m, ok := rr.Properties[string(engineStatus)+"Message"]; ok {
		msg = m
	}
	if m, ok := rr.Properties["message"]; ok {
		msg = m
	}
	r := v1alpha2.PolicyReportResult{
		Source:     SourceOf(policy),
		Policy:     key,
		Rule:       rr.Name,
		Category:   ann[CategoryAnnotation],
		Timestamp:  ts,
		Result:     v1alpha2.PolicyResult(rr.Status),
		Scored:     scored,
		Message:    msg,
		Properties: props,
	}
	switch sev := v1alpha2.PolicySeverity(ann[SeverityAnnotation]); sev {
	case v1alpha2.SeverityCritical, v1alpha2.SeverityHigh, v1alpha2.SeverityMedium, v1alpha2.SeverityLow, v1alpha2.SeverityInfo:
		r.Severity = sev
	}
	return r
}

// Sort orders results the way Kyverno does: by policy, then rule, source
// and timestamp.
func Sort(results []v1alpha2.PolicyReportResult) {
	sort.SliceStable(results, func(i, j int) bool {
		a, b := &results[i], &results[j]
		if a.Policy != b.Policy {
			return a.Policy < b.Policy
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		return a.Timestamp.Seconds < b.Timestamp.Seconds
	})
}
