package clitest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Verdict is how a row of the result table came out.
type Verdict string

const (
	// Passed: the actual result is the expected one (or the row counts as
	// passed the way Kyverno counts it, e.g. an excluded resource).
	Passed Verdict = "pass"
	// Failed: the expectation does not hold, or could not be checked
	// because the policy is invalid or of a kind or feature charter does
	// not evaluate. (Kyverno's CLI skips invalid policies and counts their
	// rows as passed; a CI job must not pass while testing nothing.)
	Failed Verdict = "fail"
)

// Reasons shown in the REASON column; Kyverno's wording where it has one.
// An invalid or unsupported policy's row reads "<reason>: <fault>".
const (
	ReasonOK            = "Ok"
	ReasonExcluded      = "Excluded"
	ReasonNotFound      = "Not found"
	ReasonInvalidPolicy = "Invalid policy"
	ReasonUnsupported   = "Unsupported"
)

// Row is one judged expectation: one results[] entry, for one resource, for
// one rule response.
type Row struct {
	// Suite names the test file (and document).
	Suite    string `json:"suite"`
	ID       int    `json:"id"`
	Policy   string `json:"policy"`
	Rule     string `json:"rule"`
	Resource string `json:"resource"`
	// Expected is the results[] entry's result; Actual what the engine said
	// (empty when there was no rule response).
	Expected string  `json:"expected"`
	Actual   string  `json:"actual"`
	Verdict  Verdict `json:"verdict"`
	Reason   string  `json:"reason"`
	Message  string  `json:"message,omitempty"`
	// responded is set when a rule response answered the row: a suite
	// whose rows have none checked nothing.
	responded bool
}

// resourceKey identifies an evaluated resource.
type resourceKey struct {
	APIVersion, Kind, Namespace, Name string
}

// String is the RESOURCE column: apiVersion/Kind/namespace/name, the
// namespace left out for cluster-scoped objects.
func (k resourceKey) String() string {
	if k.Namespace == "" {
		return k.APIVersion + "/" + k.Kind + "/" + k.Name
	}
	return k.APIVersion + "/" + k.Kind + "/" + k.Namespace + "/" + k.Name
}

// ruleOutcome is one rule response as the comparison needs it.
type ruleOutcome struct {
	Name    string
	Status  string
	Message string
	// Type is the engine's rule type (Validation, Mutation, Generation).
	Type string
	// Generated are the objects a generate rule produced (patched.go).
	Generated []map[string]any
}

// evaluation is what one policy did to one resource in one run (operation).
// There is one for every policy × resource pair, with no rules when the
// policy did not apply: Kyverno's CLI reports those as excluded.
type evaluation struct {
	Operation string
	Resource  resourceKey
	// Policy is the policy name (without namespace), and Kind its kind
	// ("" when unknown): a ClusterPolicy and a ValidatingPolicy may share
	// the name.
	Policy, Kind string
	// Invalid is set when the policy failed to compile, or is of a kind
	// charter does not evaluate (Unsupported); Rules is empty then.
	Invalid     string
	Unsupported bool
	// unsupportedRules maps the name of each rule that uses a feature
	// charter does not run in the CLI to the findings (engine's
	// unsupported-feature table); their rows fail instead of passing as
	// "Excluded" or on what the rule happened to say.
	unsupportedRules map[string]string
	Rules            []ruleOutcome
	// Patched is the object after the policy's mutate rules (or the patched
	// target of a mutate-existing evaluation); MutationFailed is set when
	// one of them errored. expected holds the suite's patchedResources and
	// generatedResource documents (patched.go).
	Patched        map[string]any
	MutationFailed bool
	expected       *expectations
}

// judge expands every results[] entry into rows against the evaluations of
// a suite. Rows are numbered from 1 in order.
//
// The rules follow Kyverno's CLI (test-format.md "Result entry"):
//   - an entry names resources by name or namespace/name (kind is never
//     used); without resources every evaluation of the policy is checked;
//   - a resource with no evaluation for the policy gives a failing
//     "Not found" row;
//   - an evaluation without a response for the rule (or its autogen rules)
//     gives a passing "Excluded" row, whatever result was expected;
//   - each matching rule response gives a row, passing when its status
//     equals the expected result.
func judge(suite string, t *Test, evals []evaluation) []Row {
	var rows []Row
	for i := range t.Results {
		exp := &t.Results[i]
		op := exp.Operation
		if op == "" {
			op = "CREATE"
		}
		mine := evaluationsOf(exp, evals, op)
		selectors := resourceSelectors(exp)
		if len(selectors) == 0 {
			for _, e := range mine {
				rows = append(rows, judgeEvaluation(exp, e)...)
			}
			continue
		}
		for _, sel := range selectors {
			found := false
			for _, e := range mine {
				if sel.matches(e.Resource) {
					found = true
					rows = append(rows, judgeEvaluation(exp, e)...)
				}
			}
			if !found {
				rows = append(rows, Row{
					Policy: exp.Policy, Rule: exp.Rule, Resource: sel.String(),
					Expected: exp.Expected(), Verdict: Failed, Reason: ReasonNotFound,
				})
			}
		}
	}
	for i := range rows {
		rows[i].Suite = suite
		rows[i].ID = i + 1
	}
	return rows
}

// evaluationsOf returns the evaluations of the entry's policy under op.
// When policies of different kinds share its name, the entry's flags pick
// the kind (isValidatingPolicy: the ValidatingPolicy, none: the
// ClusterPolicy or Policy); when none of that kind has the name, every
// kind's evaluations answer, as before kinds were told apart.
func evaluationsOf(exp *TestResult, evals []evaluation, op string) []*evaluation {
	name := exp.PolicyName()
	kinds := exp.PolicyKinds()
	var mine, ofKind []*evaluation
	for j := range evals {
		if e := &evals[j]; e.Policy == name && e.Operation == op {
			mine = append(mine, e)
			if slices.Contains(kinds, e.Kind) {
				ofKind = append(ofKind, e)
			}
		}
	}
	if len(ofKind) > 0 {
		return ofKind
	}
	return mine
}

func judgeEvaluation(exp *TestResult, e *evaluation) []Row {
	base := Row{Policy: exp.Policy, Rule: exp.Rule, Resource: e.Resource.String(), Expected: exp.Expected()}
	if e.Invalid != "" {
		reason := ReasonInvalidPolicy
		if e.Unsupported || isUnsupportedFault(e.Invalid) {
			reason = ReasonUnsupported
		}
		base.Verdict, base.Reason, base.Message = Failed, reason+": "+e.Invalid, e.Invalid
		base.Actual = "skip"
		return []Row{base}
	}
	var unsupported []string
	for _, name := range slices.Sorted(maps.Keys(e.unsupportedRules)) {
		if ruleMatches(exp, name) {
			unsupported = append(unsupported, e.unsupportedRules[name])
		}
	}
	if len(unsupported) > 0 {
		msg := strings.Join(unsupported, "; ")
		base.Verdict, base.Reason, base.Message = Failed, ReasonUnsupported+": "+msg, msg
		return []Row{base}
	}
	var rows []Row
	responded := false
	for _, rr := range e.Rules {
		if !ruleMatches(exp, rr.Name) {
			continue
		}
		responded = true
		row := base
		row.Rule, row.Actual, row.Message, row.responded = rr.Name, rr.Status, rr.Message, true
		switch {
		case rr.Status == exp.Expected():
			row.Verdict, row.Reason = Passed, ReasonOK
		case rr.Status == "error" && rr.Message != "":
			// Why it errored is the point: show it without
			// --detailed-results.
			row.Verdict, row.Reason = Failed, "Want "+exp.Expected()+", got error: "+rr.Message
		default:
			row.Verdict, row.Reason = Failed, "Want "+exp.Expected()+", got "+rr.Status
		}
		rows = append(rows, judgeOutputs(exp, e, rr, row)...)
	}
	if !responded {
		base.Verdict, base.Reason = Passed, ReasonExcluded
		return []Row{base}
	}
	return rows
}

// isUnsupportedFault recognises a compile fault saying charter does not
// implement a rule type, field or context entry (the engine's
// unsupported-feature check words them "not supported by charter").
func isUnsupportedFault(fault string) bool {
	return strings.Contains(fault, "not supported by charter")
}

// checkedNothing says why a suite checked nothing, or "" when it checked
// something: it has results, yet no row was answered by a rule response
// (every resource excluded or not found) and no row failed for an invalid
// or unsupported policy, which says why already. Kyverno's CLI passes such
// a suite; it tests nothing.
func checkedNothing(t *Test, rows []Row) string {
	if len(t.Results) == 0 {
		return ""
	}
	for _, r := range rows {
		if r.responded || strings.HasPrefix(r.Reason, ReasonInvalidPolicy+":") || strings.HasPrefix(r.Reason, ReasonUnsupported+":") {
			return ""
		}
	}
	return fmt.Sprintf("none of its %d expected results matched a rule response: no rule it names applied to the resources it names", len(t.Results))
}

// ruleMatches reports whether a rule response answers the entry: every rule
// when the entry names none, else the rule itself or its autogen rules.
func ruleMatches(exp *TestResult, name string) bool {
	if exp.Rule == "" || exp.IsValidatingAdmissionPolicy || exp.IsMutatingAdmissionPolicy ||
		exp.IsValidatingPolicy || exp.IsMutatingPolicy || exp.IsGeneratingPolicy ||
		exp.IsDeletingPolicy || exp.IsImageValidatingPolicy {
		return true
	}
	return name == exp.Rule || name == "autogen-"+exp.Rule || name == "autogen-cronjob-"+exp.Rule
}

// selector picks evaluated resources for a results[] entry.
type selector struct {
	// from resources: "name" or "namespace/name"
	namespace, name string
	hasNamespace    bool
	// from resourceSpecs
	spec *ResourceSpec
}

func (s selector) String() string {
	if s.spec != nil {
		parts := []string{s.spec.Group, s.spec.Version, s.spec.Kind, s.spec.Namespace, s.spec.Name}
		return strings.Join(parts, "/")
	}
	if s.hasNamespace {
		return s.namespace + "/" + s.name
	}
	return s.name
}

func (s selector) matches(k resourceKey) bool {
	if s.spec != nil {
		group, version := "", k.APIVersion
		if g, v, ok := strings.Cut(k.APIVersion, "/"); ok {
			group, version = g, v
		}
		sp := s.spec
		return (sp.Group == "" || sp.Group == group) &&
			(sp.Version == "" || sp.Version == version) &&
			(sp.Kind == "" || sp.Kind == k.Kind) &&
			(sp.Namespace == "" || sp.Namespace == k.Namespace) &&
			sp.Name == k.Name
	}
	if s.hasNamespace {
		return s.namespace == k.Namespace && s.name == k.Name
	}
	return s.name == k.Name
}

func resourceSelectors(exp *TestResult) []selector {
	var out []selector
	add := func(ref string) {
		if ns, name, ok := strings.Cut(ref, "/"); ok {
			out = append(out, selector{namespace: ns, name: name, hasNamespace: true})
		} else {
			out = append(out, selector{name: ref})
		}
	}
	if exp.Resource != "" {
		if exp.Namespace != "" {
			add(exp.Namespace + "/" + exp.Resource)
		} else {
			add(exp.Resource)
		}
	}
	for _, r := range exp.Resources {
		add(r)
	}
	for i := range exp.ResourceSpecs {
		out = append(out, selector{spec: &exp.ResourceSpecs[i]})
	}
	return out
}

// Counts tallies rows by verdict.
type Counts struct {
	Passed, Failed int
}

// Add counts rows.
func (c *Counts) Add(rows []Row) {
	for _, r := range rows {
		switch r.Verdict {
		case Passed:
			c.Passed++
		case Failed:
			c.Failed++
		}
	}
}
