package v1_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func ptr[T any](v T) *T { return &v }

func TestValidationFailureAction(t *testing.T) {
	tests := []struct {
		action                kyvernov1.ValidationFailureAction
		enforce, audit, valid bool
		normalized            kyvernov1.ValidationFailureAction
	}{
		{"Enforce", true, false, true, kyvernov1.Enforce},
		{"enforce", true, false, true, kyvernov1.Enforce},
		{"Audit", false, true, true, kyvernov1.Audit},
		{"audit", false, true, true, kyvernov1.Audit},
		{"", false, true, false, kyvernov1.Audit},
		{"ENFORCE", true, false, false, kyvernov1.Enforce},
		{"block", false, true, false, kyvernov1.Audit},
	}
	for _, tt := range tests {
		t.Run(string(tt.action), func(t *testing.T) {
			if got := tt.action.Enforce(); got != tt.enforce {
				t.Errorf("Enforce() = %v, want %v", got, tt.enforce)
			}
			if got := tt.action.Audit(); got != tt.audit {
				t.Errorf("Audit() = %v, want %v", got, tt.audit)
			}
			if got := tt.action.IsValid(); got != tt.valid {
				t.Errorf("IsValid() = %v, want %v", got, tt.valid)
			}
			if got := tt.action.Normalize(); got != tt.normalized {
				t.Errorf("Normalize() = %v, want %v", got, tt.normalized)
			}
		})
	}
}

func TestSpecDefaults(t *testing.T) {
	tests := []struct {
		name                  string
		spec                  kyvernov1.Spec
		background, admission bool
		applyRules            kyvernov1.ApplyRulesType
		failurePolicy         kyvernov1.FailurePolicyType
		timeout               *int32
	}{{
		name: "absent fields take Kyverno's defaults", spec: kyvernov1.Spec{},
		background: true, admission: true, applyRules: kyvernov1.ApplyAll, failurePolicy: kyvernov1.Fail,
	}, {
		name:       "explicit false",
		spec:       kyvernov1.Spec{Background: ptr(false), Admission: ptr(false), ApplyRules: ptr(kyvernov1.ApplyOne)},
		applyRules: kyvernov1.ApplyOne, failurePolicy: kyvernov1.Fail,
	}, {
		name:       "deprecated failurePolicy and timeout",
		spec:       kyvernov1.Spec{FailurePolicy: ptr(kyvernov1.Ignore), WebhookTimeoutSeconds: ptr(int32(7))},
		background: true, admission: true, applyRules: kyvernov1.ApplyAll, failurePolicy: kyvernov1.Ignore, timeout: ptr(int32(7)),
	}, {
		name: "webhookConfiguration wins over the deprecated fields",
		spec: kyvernov1.Spec{
			FailurePolicy: ptr(kyvernov1.Ignore), WebhookTimeoutSeconds: ptr(int32(7)),
			WebhookConfiguration: &kyvernov1.WebhookConfiguration{FailurePolicy: ptr(kyvernov1.Fail), TimeoutSeconds: ptr(int32(15))},
		},
		background: true, admission: true, applyRules: kyvernov1.ApplyAll, failurePolicy: kyvernov1.Fail, timeout: ptr(int32(15)),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.BackgroundProcessingEnabled(); got != tt.background {
				t.Errorf("BackgroundProcessingEnabled() = %v, want %v", got, tt.background)
			}
			if got := tt.spec.AdmissionProcessingEnabled(); got != tt.admission {
				t.Errorf("AdmissionProcessingEnabled() = %v, want %v", got, tt.admission)
			}
			if got := tt.spec.GetApplyRules(); got != tt.applyRules {
				t.Errorf("GetApplyRules() = %v, want %v", got, tt.applyRules)
			}
			if got := tt.spec.GetFailurePolicy(); got != tt.failurePolicy {
				t.Errorf("GetFailurePolicy() = %v, want %v", got, tt.failurePolicy)
			}
			if got := tt.spec.GetWebhookTimeoutSeconds(); !reflect.DeepEqual(got, tt.timeout) {
				t.Errorf("GetWebhookTimeoutSeconds() = %v, want %v", got, tt.timeout)
			}
		})
	}
}

func TestRuleFailureAction(t *testing.T) {
	validate := func(action *kyvernov1.ValidationFailureAction) kyvernov1.Rule {
		return kyvernov1.Rule{Name: "r", Validation: &kyvernov1.Validation{FailureAction: action}}
	}
	tests := []struct {
		name   string
		policy kyvernov1.ValidationFailureAction
		rule   kyvernov1.Rule
		want   kyvernov1.ValidationFailureAction
	}{
		{"neither set audits", "", validate(nil), kyvernov1.Audit},
		{"policy-level lower-case enforce", "enforce", validate(nil), kyvernov1.Enforce},
		{"rule wins over policy", kyvernov1.Enforce, validate(ptr(kyvernov1.Audit)), kyvernov1.Audit},
		{"rule lower-case", kyvernov1.Audit, validate(ptr(kyvernov1.ValidationFailureAction("enforce"))), kyvernov1.Enforce},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := kyvernov1.Spec{ValidationFailureAction: tt.policy, Rules: []kyvernov1.Rule{tt.rule}}
			if got := spec.RuleFailureAction(&spec.Rules[0]); got != tt.want {
				t.Errorf("RuleFailureAction() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRuleTypes(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want kyvernov1.RuleType
		has  []string
	}{
		{"validate", `{"name":"r","validate":{"pattern":{"a":"b"}}}`, kyvernov1.RuleTypeValidate, []string{"validate"}},
		{"empty validate block still validates", `{"name":"r","validate":{}}`, kyvernov1.RuleTypeValidate, []string{"validate"}},
		{"mutate", `{"name":"r","mutate":{"patchesJson6902":"[]"}}`, kyvernov1.RuleTypeMutate, []string{"mutate", "mutateStandard"}},
		{"mutate existing", `{"name":"r","mutate":{"targets":[{"kind":"ConfigMap"}]}}`, kyvernov1.RuleTypeMutate, []string{"mutate", "mutateExisting"}},
		{"generate", `{"name":"r","generate":{"kind":"ConfigMap","name":"x","data":{}}}`, kyvernov1.RuleTypeGenerate, []string{"generate"}},
		{"verifyImages", `{"name":"r","verifyImages":[{"imageReferences":["*"]}]}`, kyvernov1.RuleTypeVerifyImages, []string{"verifyImages"}},
		{"podSecurity", `{"name":"r","validate":{"podSecurity":{"level":"baseline"}}}`, kyvernov1.RuleTypeValidate, []string{"validate", "podSecurity"}},
		{"cel", `{"name":"r","validate":{"cel":{"expressions":[{"expression":"true"}]}}}`, kyvernov1.RuleTypeValidate, []string{"validate", "cel"}},
		{"none", `{"name":"r"}`, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r kyvernov1.Rule
			if err := json.Unmarshal([]byte(tt.yaml), &r); err != nil {
				t.Fatal(err)
			}
			if got := r.Type(); got != tt.want {
				t.Errorf("Type() = %q, want %q", got, tt.want)
			}
			got := map[string]bool{
				"validate": r.HasValidate(), "mutate": r.HasMutate(), "mutateStandard": r.HasMutateStandard(),
				"mutateExisting": r.HasMutateExisting(), "generate": r.HasGenerate(), "verifyImages": r.HasVerifyImages(),
				"podSecurity": r.HasValidatePodSecurity(), "cel": r.HasValidateCEL(),
			}
			want := map[string]bool{}
			for _, h := range tt.has {
				want[h] = true
			}
			for k, v := range got {
				if v != want[k] {
					t.Errorf("Has %s = %v, want %v", k, v, want[k])
				}
			}
		})
	}
}

func TestParseConditions(t *testing.T) {
	tests := []struct {
		name    string
		raw     string // "" means nil
		want    *kyvernov1.AnyAllConditions
		wantErr string
	}{
		{name: "absent", raw: "", want: nil},
		{name: "null", raw: "null", want: nil},
		{
			name: "any/all form",
			raw:  `{"any":[{"key":"{{a}}","operator":"Equals","value":1}],"all":[{"key":true,"operator":"NotEquals","value":false,"message":"m"}]}`,
			want: &kyvernov1.AnyAllConditions{
				AnyConditions: []kyvernov1.Condition{{RawKey: raw(`"{{a}}"`), Operator: "Equals", RawValue: raw(`1`)}},
				AllConditions: []kyvernov1.Condition{{RawKey: raw(`true`), Operator: "NotEquals", RawValue: raw(`false`), Message: "m"}},
			},
		},
		{
			name: "plain list means all",
			raw:  `[{"key":"{{request.operation}}","operator":"In","value":["CREATE","UPDATE"]}]`,
			want: &kyvernov1.AnyAllConditions{AllConditions: []kyvernov1.Condition{
				{RawKey: raw(`"{{request.operation}}"`), Operator: "In", RawValue: raw(`["CREATE","UPDATE"]`)},
			}},
		},
		{name: "empty object", raw: `{}`, want: &kyvernov1.AnyAllConditions{}},
		{name: "misspelt key", raw: `{"anyy":[]}`, wantErr: `unknown field "anyy"`},
		{name: "scalar", raw: `"x"`, wantErr: "want an object with any/all or a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in *apiextv1.JSON
			if tt.raw != "" {
				in = raw(tt.raw)
			}
			got, err := kyvernov1.ParseConditions(in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseConditions() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseConditions() = %s, want %s", mustJSON(got), mustJSON(tt.want))
			}
		})
	}
}

func TestMatchResourcesFilters(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		wantLen int
		wantAll bool
		kinds   []string
	}{
		{"any", `{"any":[{"resources":{"kinds":["Pod"]}},{"resources":{"kinds":["Service"]}}]}`, 2, false, []string{"Pod", "Service"}},
		{"all", `{"all":[{"resources":{"kinds":["Pod"]}}]}`, 1, true, []string{"Pod"}},
		{"older inline form", `{"resources":{"kinds":["Pod"]},"clusterRoles":["admin"]}`, 1, true, []string{"Pod"}},
		{"empty", `{}`, 0, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m kyvernov1.MatchResources
			if err := json.Unmarshal([]byte(tt.json), &m); err != nil {
				t.Fatal(err)
			}
			filters, all := m.Filters()
			if len(filters) != tt.wantLen || all != tt.wantAll {
				t.Errorf("Filters() = %d filters, all=%v; want %d, all=%v", len(filters), all, tt.wantLen, tt.wantAll)
			}
			if got := m.GetKinds(); !reflect.DeepEqual(got, tt.kinds) {
				t.Errorf("GetKinds() = %v, want %v", got, tt.kinds)
			}
			if m.IsEmpty() != (tt.wantLen == 0) {
				t.Errorf("IsEmpty() = %v", m.IsEmpty())
			}
		})
	}
}

func TestImageVerificationDefaults(t *testing.T) {
	var absent kyvernov1.ImageVerification
	if !absent.IsMutateDigest() || !absent.IsVerifyDigest() || !absent.IsRequired() || !absent.IsUseCache() || absent.GetType() != kyvernov1.Cosign {
		t.Errorf("absent fields: want mutateDigest, verifyDigest, required, useCache true and type Cosign; got %+v", absent)
	}
	set := kyvernov1.ImageVerification{Type: kyvernov1.Notary, MutateDigest: ptr(false), VerifyDigest: ptr(false), Required: ptr(false), UseCache: ptr(false)}
	if set.IsMutateDigest() || set.IsVerifyDigest() || set.IsRequired() || set.IsUseCache() || set.GetType() != kyvernov1.Notary {
		t.Errorf("explicit false: got %+v", set)
	}
}

func TestPolicyInterface(t *testing.T) {
	tests := []struct {
		policy     kyvernov1.StatusHolder
		kind       string
		namespaced bool
	}{
		{&kyvernov1.ClusterPolicy{}, "ClusterPolicy", false},
		{&kyvernov1.Policy{}, "Policy", true},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			p := tt.policy
			if p.GetKind() != tt.kind || p.IsNamespaced() != tt.namespaced {
				t.Errorf("GetKind() = %s, IsNamespaced() = %v", p.GetKind(), p.IsNamespaced())
			}
			p.GetSpec().Rules = append(p.GetSpec().Rules, kyvernov1.Rule{Name: "r", Validation: &kyvernov1.Validation{}})
			if p.IsReady() {
				t.Error("IsReady() = true before SetReady")
			}
			p.GetStatus().SetReady(true, 3, kyvernov1.PolicyReasonSucceeded, "")
			if !p.IsReady() || !*p.GetStatus().Ready {
				t.Error("IsReady() = false after SetReady(true)")
			}
			cp := p.CreateDeepCopy()
			cp.GetSpec().Rules[0].Name = "changed"
			if p.GetSpec().Rules[0].Name != "r" {
				t.Error("CreateDeepCopy shares rules with the original")
			}
			if got := kyvernov1.CountRules(p.GetSpec()); got.Validate != 1 || got.Mutate != 0 {
				t.Errorf("CountRules() = %+v", got)
			}
		})
	}
}

func raw(s string) *apiextv1.JSON { return &apiextv1.JSON{Raw: []byte(s)} }

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
