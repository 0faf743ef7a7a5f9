package clitest

import (
	"testing"
)

var (
	podGood   = resourceKey{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "good"}
	podBad    = resourceKey{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "bad"}
	podOther  = resourceKey{APIVersion: "v1", Kind: "Pod", Namespace: "other", Name: "good"}
	deployWeb = resourceKey{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}
)

// short is a row reduced to what the comparison decides.
type short struct {
	Rule, Resource string
	Verdict        Verdict
	Reason         string
}

// checkRows compares a suite's rows, in order, with want.
func checkRows(t *testing.T, rows []Row, want []short) {
	t.Helper()
	if len(rows) != len(want) {
		t.Fatalf("got %d rows %+v, want %d", len(rows), rows, len(want))
	}
	for i, r := range rows {
		if got := (short{r.Rule, r.Resource, r.Verdict, r.Reason}); got != want[i] {
			t.Errorf("row %d: got %+v, want %+v (message %q)", i+1, got, want[i], r.Message)
		}
	}
}

func TestJudge(t *testing.T) {
	evals := []evaluation{
		{Operation: "CREATE", Resource: podGood, Policy: "p", Rules: []ruleOutcome{
			{Name: "r", Status: "pass"}, {Name: "other", Status: "skip"}}},
		{Operation: "CREATE", Resource: podBad, Policy: "p", Rules: []ruleOutcome{
			{Name: "r", Status: "fail", Message: "label app is required"}}},
		{Operation: "CREATE", Resource: podOther, Policy: "p", Rules: []ruleOutcome{
			{Name: "r", Status: "warn"}}},
		{Operation: "CREATE", Resource: deployWeb, Policy: "p", Rules: []ruleOutcome{
			{Name: "autogen-r", Status: "fail"}}},
		{Operation: "UPDATE", Resource: podGood, Policy: "p", Rules: []ruleOutcome{
			{Name: "r", Status: "fail"}}},
		{Operation: "CREATE", Resource: podGood, Policy: "broken", Invalid: "spec.rules: a policy needs at least one rule"},
		{Operation: "CREATE", Resource: podGood, Policy: "ns-policy", Rules: []ruleOutcome{{Name: "r", Status: "pass"}}},
		{Operation: "CREATE", Resource: podGood, Policy: "vpol", Unsupported: true,
			Invalid: "policies.kyverno.io/v1 ValidatingPolicy is not supported by charter yet"},
		{Operation: "CREATE", Resource: podGood, Policy: "no-feature", Invalid: "spec.rules[0].verifyImages: not supported by charter"},
		{Operation: "CREATE", Resource: podGood, Policy: "erring", Rules: []ruleOutcome{
			{Name: "r", Status: "error", Message: `failed to load context: configmaps "x" not found`}}},
	}
	tests := []struct {
		name string
		exp  TestResult
		want []short
	}{
		{
			name: "pass as expected",
			exp:  TestResult{Policy: "p", Rule: "r", Resources: []string{"default/good"}, Result: "pass"},
			want: []short{{"r", "v1/Pod/default/good", Passed, "Ok"}},
		},
		{
			name: "mismatch names both results",
			exp:  TestResult{Policy: "p", Rule: "r", Resources: []string{"bad"}, Result: "pass"},
			want: []short{{"r", "v1/Pod/default/bad", Failed, "Want pass, got fail"}},
		},
		{
			name: "a bare name matches the resource in every namespace",
			exp:  TestResult{Policy: "p", Rule: "r", Resources: []string{"good"}, Result: "pass"},
			want: []short{{"r", "v1/Pod/default/good", Passed, "Ok"}, {"r", "v1/Pod/other/good", Failed, "Want pass, got warn"}},
		},
		{
			name: "warn is its own result",
			exp:  TestResult{Policy: "p", Rule: "r", Resources: []string{"other/good"}, Result: "warn"},
			want: []short{{"r", "v1/Pod/other/good", Passed, "Ok"}},
		},
		{
			name: "skip must be reported as skip",
			exp:  TestResult{Policy: "p", Rule: "other", Resources: []string{"default/good"}, Result: "skip"},
			want: []short{{"other", "v1/Pod/default/good", Passed, "Ok"}},
		},
		{
			name: "the rule matches its autogen rule",
			exp:  TestResult{Policy: "p", Rule: "r", Resources: []string{"web"}, Kind: "Deployment", Result: "fail"},
			want: []short{{"autogen-r", "apps/v1/Deployment/default/web", Passed, "Ok"}},
		},
		{
			name: "kind is not used for matching",
			exp:  TestResult{Policy: "p", Rule: "r", Resources: []string{"web"}, Kind: "Pod", Result: "fail"},
			want: []short{{"autogen-r", "apps/v1/Deployment/default/web", Passed, "Ok"}},
		},
		{
			name: "a rule without a response is excluded and passes whatever was expected",
			exp:  TestResult{Policy: "p", Rule: "other", Resources: []string{"bad"}, Result: "fail"},
			want: []short{{"other", "v1/Pod/default/bad", Passed, "Excluded"}},
		},
		{
			name: "an unknown resource is not found",
			exp:  TestResult{Policy: "p", Rule: "r", Resources: []string{"nope", "default/good"}, Result: "pass"},
			want: []short{{"r", "nope", Failed, "Not found"}, {"r", "v1/Pod/default/good", Passed, "Ok"}},
		},
		{
			name: "a result for an unknown policy is not found",
			exp:  TestResult{Policy: "q", Rule: "r", Resources: []string{"good"}, Result: "pass"},
			want: []short{{"r", "good", Failed, "Not found"}},
		},
		{
			name: "without a rule every rule response is checked",
			exp:  TestResult{Policy: "p", Resources: []string{"default/good"}, Result: "pass"},
			want: []short{{"r", "v1/Pod/default/good", Passed, "Ok"}, {"other", "v1/Pod/default/good", Failed, "Want pass, got skip"}},
		},
		{
			name: "without resources every evaluation of the policy is checked",
			exp:  TestResult{Policy: "p", Rule: "r", Result: "fail"},
			want: []short{
				{"r", "v1/Pod/default/good", Failed, "Want fail, got pass"},
				{"r", "v1/Pod/default/bad", Passed, "Ok"},
				{"r", "v1/Pod/other/good", Failed, "Want fail, got warn"},
				{"autogen-r", "apps/v1/Deployment/default/web", Passed, "Ok"},
			},
		},
		{
			name: "the operation picks its own run",
			exp:  TestResult{Policy: "p", Rule: "r", Resources: []string{"default/good"}, Result: "fail", Operation: "UPDATE"},
			want: []short{{"r", "v1/Pod/default/good", Passed, "Ok"}},
		},
		{
			name: "the namespace of a Policy is not compared",
			exp:  TestResult{Policy: "team/ns-policy", Rule: "r", Resources: []string{"default/good"}, Result: "pass"},
			want: []short{{"r", "v1/Pod/default/good", Passed, "Ok"}},
		},
		{
			name: "the deprecated resource, namespace and status fields",
			exp:  TestResult{Policy: "p", Rule: "r", Resource: "good", Namespace: "other", Status: "warn"},
			want: []short{{"r", "v1/Pod/other/good", Passed, "Ok"}},
		},
		{
			name: "resourceSpecs select by group, version, kind, namespace and name",
			exp: TestResult{Policy: "p", Rule: "r", Result: "fail", ResourceSpecs: []ResourceSpec{
				{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"},
				{Version: "v1", Kind: "Pod", Namespace: "default", Name: "web"},
			}},
			want: []short{{"autogen-r", "apps/v1/Deployment/default/web", Passed, "Ok"}, {"r", "/v1/Pod/default/web", Failed, "Not found"}},
		},
		{
			name: "an invalid policy fails its rows with its fault",
			exp:  TestResult{Policy: "broken", Rule: "r", Resources: []string{"good"}, Result: "pass"},
			want: []short{{"r", "v1/Pod/default/good", Failed, "Invalid policy: spec.rules: a policy needs at least one rule"}},
		},
		{
			name: "an expected skip of an invalid policy fails too",
			exp:  TestResult{Policy: "broken", Rule: "r", Resources: []string{"good"}, Result: "skip"},
			want: []short{{"r", "v1/Pod/default/good", Failed, "Invalid policy: spec.rules: a policy needs at least one rule"}},
		},
		{
			name: "an unsupported policy kind fails its rows",
			exp:  TestResult{Policy: "vpol", Resources: []string{"good"}, Result: "fail", IsValidatingPolicy: true},
			want: []short{{"", "v1/Pod/default/good", Failed, "Unsupported: policies.kyverno.io/v1 ValidatingPolicy is not supported by charter yet"}},
		},
		{
			name: "an unsupported feature found at compile fails its rows",
			exp:  TestResult{Policy: "no-feature", Rule: "r", Resources: []string{"good"}, Result: "pass"},
			want: []short{{"r", "v1/Pod/default/good", Failed, "Unsupported: spec.rules[0].verifyImages: not supported by charter"}},
		},
		{
			name: "an error result fails with its message",
			exp:  TestResult{Policy: "erring", Rule: "r", Resources: []string{"good"}, Result: "pass"},
			want: []short{{"r", "v1/Pod/default/good", Failed, "Want pass, got error: failed to load context: configmaps \"x\" not found"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			test := &Test{Results: []TestResult{tt.exp}}
			rows := judge("suite.yaml", test, evals)
			var got []short
			for i, r := range rows {
				if r.ID != i+1 || r.Suite != "suite.yaml" || r.Expected != tt.exp.Expected() {
					t.Errorf("row %d: id %d, suite %q, expected %q", i, r.ID, r.Suite, r.Expected)
				}
				got = append(got, short{r.Rule, r.Resource, r.Verdict, r.Reason})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d rows %+v, want %d %+v", len(got), got, len(tt.want), tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("row %d: got %+v, want %+v", i+1, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestSummaryLine(t *testing.T) {
	tests := []struct {
		counts Counts
		want   string
	}{
		{Counts{Passed: 1551}, "Summary: 1551 passed, 0 failed"},
		{Counts{Passed: 3, Failed: 2}, "Summary: 3 passed, 2 failed"},
	}
	for _, tt := range tests {
		if got := (Tally{Counts: tt.counts}).SummaryLine(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	if got, want := (Tally{Counts: Counts{Passed: 3}, CheckedNothing: 2}).SummaryLine(), "Summary: 3 passed, 0 failed, 2 suite(s) checked nothing"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := (Tally{}).SummaryLine(), "Summary: 0 passed, 0 failed; nothing was checked"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestAnyFailure: a run passes only when it checked something and all of
// it held.
func TestAnyFailure(t *testing.T) {
	tests := []struct {
		tally Tally
		want  bool
	}{
		{Tally{Counts: Counts{Passed: 3}}, false},
		{Tally{Counts: Counts{Passed: 3, Failed: 1}}, true},
		{Tally{Counts: Counts{Passed: 3}, Broken: 1}, true},
		{Tally{Counts: Counts{Passed: 3}, CheckedNothing: 1}, true},
		{Tally{}, true},
	}
	for _, tt := range tests {
		if got := tt.tally.AnyFailure(); got != tt.want {
			t.Errorf("%+v: AnyFailure %v, want %v", tt.tally, got, tt.want)
		}
	}
}

func TestCheckedNothing(t *testing.T) {
	two := &Test{Results: []TestResult{{Policy: "p", Result: "fail"}, {Policy: "p", Result: "pass"}}}
	tests := []struct {
		name string
		test *Test
		rows []Row
		want string
	}{
		{"no results: nothing to say", &Test{}, nil, ""},
		{"a rule response answered a row", two, []Row{{Reason: ReasonExcluded}, {Reason: ReasonOK, responded: true}}, ""},
		{"an invalid policy says why already", two, []Row{{Reason: ReasonInvalidPolicy + ": bad"}}, ""},
		{"excluded and not found only", two, []Row{{Reason: ReasonExcluded}, {Reason: ReasonNotFound}},
			"none of its 2 expected results matched a rule response: no rule it names applied to the resources it names"},
	}
	for _, tt := range tests {
		if got := checkedNothing(tt.test, tt.rows); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
