package promotion

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// DefaultMaxListed is how many blocking results a denial names before
// summing up the rest as "and N more".
const DefaultMaxListed = 10

// chartersSource is the `source` of the results charter writes for
// ClusterPolicies and Policies (reconciler/reports/report.Source).
const chartersSource = "charter"

// DowngradeAllow and DowngradeDeny are the values of charter serve
// --promotion-downgrade: whether a namespace may move from
// charter.dev/enforcement=enforce back to Audit (the label set to audit
// or removed). Either way the move leaves an Event naming the user.
const (
	DowngradeAllow = "allow"
	DowngradeDeny  = "deny"
)

// Policy is a staged policy the gate checks.
type Policy struct {
	// Kind is the policy's kind: a ClusterPolicy and a ValidatingPolicy
	// of one name are two policies, each judged by its own results (their
	// `source` differs) and failure policy. "" is read as ClusterPolicy
	// or Policy.
	Kind string
	// Key is the policy as report results name it: the name of a
	// ClusterPolicy, "namespace/name" of a Policy.
	Key string
	// FailClosed is true for failurePolicy Fail: its error results block.
	FailClosed bool
}

// resultOf identifies the results of a policy: by source and policy, as
// Kyverno keys them too.
func (p Policy) resultOf() resultID {
	source := policiesv1.ReportSource(p.Kind)
	if source == "" {
		source = chartersSource
	}
	return resultID{source: source, policy: p.Key}
}

// resultID is a result's source and policy.
type resultID struct{ source, policy string }

// idOf is the resultID of a report result. A result without a source is
// read as charter's result of a ClusterPolicy or Policy: charter has
// always written one, so such a result is not from a CEL policy, and
// reading it so errs toward blocking.
func idOf(r *v1alpha2.PolicyReportResult) resultID {
	if r.Source == "" {
		return resultID{source: chartersSource, policy: r.Policy}
	}
	return resultID{source: r.Source, policy: r.Policy}
}

// Finding is one report result that blocks promotion.
type Finding struct {
	// Kind and Name are the resource the result is about.
	Kind, Name string
	// PolicyKind is the kind of the staged policy whose result it is.
	PolicyKind   string
	Policy, Rule string
	Result       v1alpha2.PolicyResult
}

// Resource is "Kind/name", as kubectl names a resource.
func (f Finding) Resource() string { return f.Kind + "/" + f.Name }

// String names the resource, the policy (with its kind when it is not a
// ClusterPolicy or Policy, so that policies of one name are told apart),
// the rule and the result, e.g. "Pod/web (ValidatingPolicy
// require-labels: fail)".
func (f Finding) String() string {
	s := f.Resource() + " ("
	if f.PolicyKind != "" && f.PolicyKind != kyvernov1.ClusterPolicyKind && f.PolicyKind != kyvernov1.PolicyKind {
		s += f.PolicyKind + " "
	}
	s += f.Policy
	if f.Rule != "" {
		s += "/" + f.Rule
	}
	return s + ": " + string(f.Result) + ")"
}

// Findings returns the results of the reports that block promotion, in a
// stable order (resource, policy, rule), each once.
//
// A result counts for the staged policy of its source and policy name
// only: a ClusterPolicy and a ValidatingPolicy of one name (a migration
// under way) are two policies, and the failing results of the unstaged
// one, or the error results of the one that fails open, do not block the
// other's promotion.
func Findings(reports []v1alpha2.PolicyReport, staged []Policy) []Finding {
	byResult := make(map[resultID]Policy, len(staged))
	for _, p := range staged {
		byResult[p.resultOf()] = p
	}
	seen := map[Finding]bool{}
	var out []Finding
	for i := range reports {
		rep := &reports[i]
		for j := range rep.Results {
			r := &rep.Results[j]
			p, isStaged := byResult[idOf(r)]
			if !isStaged || !blocks(r.Result, p.FailClosed) {
				continue
			}
			kind, name := resourceOf(rep, r)
			f := Finding{Kind: kind, Name: name, PolicyKind: p.Kind, Policy: r.Policy, Rule: r.Rule, Result: r.Result}
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Policy != b.Policy {
			return a.Policy < b.Policy
		}
		if a.PolicyKind != b.PolicyKind {
			return a.PolicyKind < b.PolicyKind
		}
		return a.Rule < b.Rule
	})
	return out
}

// blocks reports whether a result would be a denial under Enforce.
func blocks(r v1alpha2.PolicyResult, failClosed bool) bool {
	return r == v1alpha2.StatusFail || (r == v1alpha2.StatusError && failClosed)
}

// resourceOf names the resource a result is about: the report's scope
// (charter's reports), else the result's resources, else the report's
// owner; a report naming none of them is named itself.
func resourceOf(rep *v1alpha2.PolicyReport, r *v1alpha2.PolicyReportResult) (kind, name string) {
	switch {
	case rep.Scope != nil && rep.Scope.Name != "":
		return rep.Scope.Kind, rep.Scope.Name
	case len(r.Resources) > 0:
		return r.Resources[0].Kind, r.Resources[0].Name
	case len(rep.OwnerReferences) > 0:
		return rep.OwnerReferences[0].Kind, rep.OwnerReferences[0].Name
	}
	return "PolicyReport", rep.Name
}

// Message is the denial for a namespace whose reports hold the findings,
// naming at most max of them (DefaultMaxListed when max <= 0), e.g.
//
//	namespace "shop" cannot be labelled charter.dev/enforcement=enforce: 2 results of staged policies fail there and would be denied under Enforce: Pod/web (restrict-seccomp/check-seccomp: fail), Pod/db (require-run-as-nonroot/run-as-non-root: fail); fix them or add PolicyExceptions, then label the namespace again
func Message(namespace string, findings []Finding, max int) string {
	if max <= 0 {
		max = DefaultMaxListed
	}
	var b strings.Builder
	fmt.Fprintf(&b, "namespace %q cannot be labelled %s=%s: ", namespace, charter.EnforcementLabel, charter.EnforcementEnforce)
	if len(findings) == 1 {
		b.WriteString("1 result of a staged policy fails there and would be denied under Enforce: ")
	} else {
		fmt.Fprintf(&b, "%d results of staged policies fail there and would be denied under Enforce: ", len(findings))
	}
	for i, f := range findings {
		if i == max {
			fmt.Fprintf(&b, " and %d more", len(findings)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.String())
	}
	b.WriteString("; fix them or add PolicyExceptions, then label the namespace again")
	return b.String()
}

// ReportLister lists charter's reports of a namespace (PolicyReports or
// OpenReports' Reports), in the v1alpha2 shape.
type ReportLister interface {
	PolicyReports(ctx context.Context, namespace string) ([]v1alpha2.PolicyReport, error)
}

// Gate decides promotions from a namespace's reports.
type Gate struct {
	Reports ReportLister
	// MaxListed caps the results a denial names (DefaultMaxListed).
	MaxListed int
	// DenyDowngrade refuses a namespace's move from enforce back to
	// Audit (--promotion-downgrade=deny).
	DenyDowngrade bool
}

// DowngradeDenial returns the denial of user moving the namespace from
// charter.dev/enforcement=enforce to newValue ("" when the label is
// removed), or "" when downgrades are allowed.
func (g *Gate) DowngradeDenial(namespace, user, newValue string) string {
	if !g.DenyDowngrade {
		return ""
	}
	return fmt.Sprintf("namespace %q: %s %s denied to user %q: charter serve --promotion-downgrade=deny keeps a namespace that enforces from going back to Audit",
		namespace, charter.EnforcementLabel, downgradeText(newValue), user)
}

// DowngradeNote is the text of the Event that records a downgrade.
func DowngradeNote(namespace, user, newValue string) string {
	return fmt.Sprintf("user %q moved namespace %q back to Audit: %s %s; staged policies no longer enforce there",
		user, namespace, charter.EnforcementLabel, downgradeText(newValue))
}

func downgradeText(newValue string) string {
	if newValue == "" {
		return "removed (was " + charter.EnforcementEnforce + ")"
	}
	return "changed from " + charter.EnforcementEnforce + " to " + newValue
}

// Check returns the denial for promoting the namespace, or "" when its
// reports hold no blocking result of the staged policies. An error means
// the reports could not be read; the caller refuses the promotion then,
// since a gate that cannot look must not open.
func (g *Gate) Check(ctx context.Context, namespace string, staged []Policy) (string, error) {
	if len(staged) == 0 {
		return "", nil
	}
	reports, err := g.Reports.PolicyReports(ctx, namespace)
	if err != nil {
		return "", fmt.Errorf("reading the reports of namespace %q: %w", namespace, err)
	}
	findings := Findings(reports, staged)
	if len(findings) == 0 {
		return "", nil
	}
	return Message(namespace, findings, g.MaxListed), nil
}
