package metrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

const ruleInfoHeader = `
# HELP kyverno_policy_rule_info_total One per rule of every installed policy, autogen rules included.
# TYPE kyverno_policy_rule_info_total gauge
`

func TestRuleInfo(t *testing.T) {
	const scoped = `otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""`
	requireLabels := `{` + scoped + `,policy_background_mode="true",policy_name="require-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="enforce",`
	defaultSA := `{` + scoped + `,policy_background_mode="true",policy_name="default-sa",policy_namespace="team-a",policy_type="namespaced",policy_validation_mode="audit",`
	tests := []struct {
		name     string
		policies []string
		ready    []bool
		want     string
	}{
		{
			name:     "a ready ClusterPolicy: its rules, then autogen's for Pod controllers",
			policies: []string{"require-labels.yaml"},
			ready:    []bool{true},
			want: `
kyverno_policy_rule_info_total` + requireLabels + `rule_name="autogen-check",rule_type="validate",status_ready="true"} 1
kyverno_policy_rule_info_total` + requireLabels + `rule_name="autogen-check-team",rule_type="validate",status_ready="true"} 1
kyverno_policy_rule_info_total` + requireLabels + `rule_name="autogen-cronjob-check",rule_type="validate",status_ready="true"} 1
kyverno_policy_rule_info_total` + requireLabels + `rule_name="autogen-cronjob-check-team",rule_type="validate",status_ready="true"} 1
kyverno_policy_rule_info_total` + requireLabels + `rule_name="check",rule_type="validate",status_ready="true"} 1
kyverno_policy_rule_info_total` + requireLabels + `rule_name="check-team",rule_type="validate",status_ready="true"} 1
`,
		},
		{
			name:     "a namespaced mutate Policy not ready, and a generate rule autogen leaves alone",
			policies: []string{"default-sa.yaml", "namespace-quota.yaml"},
			ready:    []bool{false, true},
			want: `
kyverno_policy_rule_info_total` + defaultSA + `rule_name="autogen-cronjob-set-sa",rule_type="mutate",status_ready="false"} 1
kyverno_policy_rule_info_total` + defaultSA + `rule_name="autogen-set-sa",rule_type="mutate",status_ready="false"} 1
kyverno_policy_rule_info_total` + defaultSA + `rule_name="set-sa",rule_type="mutate",status_ready="false"} 1
kyverno_policy_rule_info_total{` + scoped + `,policy_background_mode="true",policy_name="namespace-quota",policy_namespace="-",policy_type="cluster",policy_validation_mode="audit",rule_name="default-quota",rule_type="generate",status_ready="true"} 1
`,
		},
		{
			name:     "a NamespacedValidatingPolicy: one series, rule \"\" as in its results",
			policies: []string{"vpol-no-latest.yaml"},
			ready:    []bool{true},
			want: `
kyverno_policy_rule_info_total{` + scoped + `,policy_background_mode="false",policy_name="no-latest",policy_namespace="team-a",policy_type="namespaced",policy_validation_mode="enforce",rule_name="",rule_type="validate",status_ready="true"} 1
`,
		},
		{name: "no policy installed, no series", policies: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rec, err := New(reg, "test")
			if err != nil {
				t.Fatal(err)
			}
			var states []PolicyState
			for i, file := range tc.policies {
				states = append(states, PolicyState{Policy: loadPolicy(t, file), Ready: tc.ready[i]})
			}
			rec.SetPolicyInventory(func() ([]PolicyState, error) { return states, nil })
			want := ""
			if tc.want != "" {
				want = ruleInfoHeader + strings.TrimPrefix(tc.want, "\n")
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), PolicyRuleInfo); err != nil {
				t.Error(err)
			}
		})
	}
}

// A ClusterPolicy and a GeneratingPolicy of one name, each with a
// generate rule of that name, have the same labels: one series, and the
// scrape does not fail on a repeated one.
func TestRuleInfoSameNameDifferentKinds(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	states := []PolicyState{{Policy: loadPolicy(t, "quota-cp.yaml"), Ready: true}, {Policy: loadPolicy(t, "gpol-quota.yaml"), Ready: true}}
	rec.SetPolicyInventory(func() ([]PolicyState, error) { return states, nil })
	if n, err := testutil.GatherAndCount(reg, PolicyRuleInfo); err != nil || n != 1 {
		t.Errorf("%d series of %s (%v), want 1", n, PolicyRuleInfo, err)
	}
}

func TestRuleInfoWithoutInventory(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, "test"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, PolicyRuleInfo); err != nil || n != 0 {
		t.Errorf("%d series of %s (%v) before an inventory was set, want 0", n, PolicyRuleInfo, err)
	}
	var nilRecorder *Recorder
	nilRecorder.SetPolicyInventory(func() ([]PolicyState, error) { return nil, nil })
}

// A scrape reuses the rules of a policy generation it has seen and
// expands a new generation afresh.
func TestRuleInfoFollowsGenerations(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	p := loadPolicy(t, "namespace-quota.yaml").(*kyvernov1.ClusterPolicy)
	p.UID, p.Generation = types.UID("uid-1"), 1
	current := p
	rec.SetPolicyInventory(func() ([]PolicyState, error) { return []PolicyState{{Policy: current, Ready: true}}, nil })
	ruleNames := func() []string {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range families {
			if f.GetName() != PolicyRuleInfo {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "rule_name" {
						names = append(names, l.GetValue())
					}
				}
			}
		}
		return names
	}
	if got := ruleNames(); len(got) != 1 || got[0] != "default-quota" {
		t.Fatalf("first scrape: rules %q, want [default-quota]", got)
	}
	// The same generation: the cached expansion, even if the object
	// differs (it cannot, from an API server).
	sameGen := p.DeepCopy()
	sameGen.Spec.Rules[0].Name = "not-seen"
	current = sameGen
	if got := ruleNames(); len(got) != 1 || got[0] != "default-quota" {
		t.Errorf("same generation: rules %q, want the cached [default-quota]", got)
	}
	renamed := sameGen.DeepCopy()
	renamed.Generation = 2
	renamed.Spec.Rules[0].Name = "renamed"
	current = renamed
	if got := ruleNames(); len(got) != 1 || got[0] != "renamed" {
		t.Errorf("new generation: rules %q, want [renamed]", got)
	}
}

func TestRuleInfoInventoryError(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	rec.SetPolicyInventory(func() ([]PolicyState, error) { return nil, errors.New("policy informers not synced") })
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "policy informers not synced") {
		t.Errorf("Gather error = %v, want the inventory's", err)
	}
}
