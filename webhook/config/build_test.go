package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// fakeResolver serves a few kinds.
type fakeResolver map[string][]Resource

func (f fakeResolver) Resolve(group, version, kind, sub string) ([]Resource, error) {
	key := kind
	if sub != "" {
		key += "/" + sub
	}
	return f[key], nil
}

var resolver = fakeResolver{
	"Pod":                   {{Version: "v1", Resource: "pods", Namespaced: true}},
	"Pod/exec":              {{Version: "v1", Resource: "pods/exec", Namespaced: true}},
	"Namespace":             {{Version: "v1", Resource: "namespaces"}},
	"Deployment":            {{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true}},
	"DaemonSet":             {{Group: "apps", Version: "v1", Resource: "daemonsets", Namespaced: true}},
	"StatefulSet":           {{Group: "apps", Version: "v1", Resource: "statefulsets", Namespaced: true}},
	"ReplicaSet":            {{Group: "apps", Version: "v1", Resource: "replicasets", Namespaced: true}},
	"Job":                   {{Group: "batch", Version: "v1", Resource: "jobs", Namespaced: true}},
	"CronJob":               {{Group: "batch", Version: "v1", Resource: "cronjobs", Namespaced: true}},
	"ReplicationController": {{Version: "v1", Resource: "replicationcontrollers", Namespaced: true}},
}

func clusterPolicy(name string, rule kyvernov1.Rule, mutate func(*kyvernov1.Spec)) *kyvernov1.ClusterPolicy {
	p := &kyvernov1.ClusterPolicy{TypeMeta: metav1.TypeMeta{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{rule}}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func validateRule(ops []kyvernov1.AdmissionOperation, kinds ...string) kyvernov1.Rule {
	return kyvernov1.Rule{Name: "r",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{Kinds: kinds, Operations: ops}}}},
		Validation:     &kyvernov1.Validation{Message: "m", Deny: &kyvernov1.Deny{}}}
}

func TestBuild(t *testing.T) {
	ignore := kyvernov1.Ignore
	timeout := int32(25)
	no := false
	policies := []kyvernov1.PolicyInterface{
		clusterPolicy("pods", validateRule(nil, "Pod"), nil),
		clusterPolicy("ns-create", validateRule([]kyvernov1.AdmissionOperation{"CREATE"}, "Namespace"), func(s *kyvernov1.Spec) {
			s.WebhookConfiguration = &kyvernov1.WebhookConfiguration{FailurePolicy: &ignore, TimeoutSeconds: &timeout}
		}),
		clusterPolicy("background-only", validateRule(nil, "Pod/exec"), func(s *kyvernov1.Spec) { s.Admission = &no }),
		clusterPolicy("unknown", validateRule(nil, "Widget"), nil),
	}
	cfgs, err := Build(policies, resolver, Settings{
		Target:             Target{URL: "https://127.0.0.1:9443"},
		CABundle:           []byte("ca"),
		ExcludedNamespaces: []string{"kube-system", "charter"},
	})
	if err != nil {
		t.Fatal(err)
	}
	v := cfgs.Validating
	if v.Name != ResourceValidatingName || v.Labels[ManagedByLabel] != ManagedByValue {
		t.Errorf("metadata = %+v", v.ObjectMeta)
	}
	if len(v.Webhooks) != 2 || v.Webhooks[0].Name != ValidateWebhookFail || v.Webhooks[1].Name != ValidateWebhookIgnore {
		t.Fatalf("webhooks = %+v", v.Webhooks)
	}
	fail, ign := v.Webhooks[0], v.Webhooks[1]
	if *fail.ClientConfig.URL != "https://127.0.0.1:9443/validate/fail" || string(fail.ClientConfig.CABundle) != "ca" {
		t.Errorf("client config = %+v", fail.ClientConfig)
	}
	ns := admissionregistrationv1.NamespacedScope
	all := admissionregistrationv1.AllScopes
	wantFailRules := []admissionregistrationv1.RuleWithOperations{
		{Operations: validateOps, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
			Resources: []string{"daemonsets", "deployments", "replicasets", "statefulsets"}, Scope: &ns}},
		{Operations: validateOps, Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"},
			Resources: []string{"cronjobs", "jobs"}, Scope: &ns}},
		{Operations: validateOps, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
			Resources: []string{"pods", "pods/ephemeralcontainers", "replicationcontrollers"}, Scope: &ns}},
	}
	if !reflect.DeepEqual(sortRules(fail.Rules), sortRules(wantFailRules)) {
		t.Errorf("fail rules:\n got %+v\nwant %+v", fail.Rules, wantFailRules)
	}
	wantIgnoreRules := []admissionregistrationv1.RuleWithOperations{
		{Operations: []admissionregistrationv1.OperationType{"CREATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
			Resources: []string{"namespaces"}, Scope: &all}},
	}
	if !reflect.DeepEqual(ign.Rules, wantIgnoreRules) {
		t.Errorf("ignore rules:\n got %+v\nwant %+v", ign.Rules, wantIgnoreRules)
	}
	if *fail.TimeoutSeconds != 10 || *ign.TimeoutSeconds != 25 {
		t.Errorf("timeouts = %d, %d; want 10, 25", *fail.TimeoutSeconds, *ign.TimeoutSeconds)
	}
	if *fail.FailurePolicy != admissionregistrationv1.Fail || *ign.FailurePolicy != admissionregistrationv1.Ignore {
		t.Error("failure policies")
	}
	wantSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}},
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"charter"}},
	}}
	if !reflect.DeepEqual(fail.NamespaceSelector, wantSel) {
		t.Errorf("namespaceSelector = %+v", fail.NamespaceSelector)
	}
	if len(cfgs.Mutating.Webhooks) != 0 {
		t.Errorf("no mutate rule, yet mutating webhooks %+v", cfgs.Mutating.Webhooks)
	}
	if !reflect.DeepEqual(cfgs.Unresolved, map[string][]string{"unknown": {"Widget"}}) {
		t.Errorf("unresolved = %v", cfgs.Unresolved)
	}
	if pv := cfgs.PolicyValidating.Webhooks; len(pv) != 2 || *pv[0].ClientConfig.URL != "https://127.0.0.1:9443/policyvalidate" {
		t.Errorf("policy webhook = %+v", pv)
	}
	ttlHook := cfgs.PolicyValidating.Webhooks[1]
	if ttlHook.Name != TTLWebhook || *ttlHook.ClientConfig.URL != "https://127.0.0.1:9443/verifyttl" ||
		ttlHook.ObjectSelector.MatchExpressions[0].Key != "cleanup.kyverno.io/ttl" || *ttlHook.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("TTL webhook = %+v", ttlHook)
	}
}

func TestBuildInClusterUsesService(t *testing.T) {
	cfgs, err := Build([]kyvernov1.PolicyInterface{clusterPolicy("pods", validateRule(nil, "Pod"), nil)}, resolver,
		Settings{Target: Target{Service: "charter", Namespace: "charter", Port: 443}})
	if err != nil {
		t.Fatal(err)
	}
	svc := cfgs.Validating.Webhooks[0].ClientConfig.Service
	if svc == nil || svc.Name != "charter" || svc.Namespace != "charter" || *svc.Path != "/validate/fail" || *svc.Port != 443 {
		t.Errorf("service = %+v", svc)
	}
}

func TestEmptyPoliciesGiveEmptyConfigurations(t *testing.T) {
	cfgs, err := Build(nil, resolver, Settings{Target: Target{URL: "https://x"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs.Validating.Webhooks) != 0 || len(cfgs.Mutating.Webhooks) != 0 {
		t.Error("webhooks without policies")
	}
}

func sortRules(in []admissionregistrationv1.RuleWithOperations) map[string]admissionregistrationv1.RuleWithOperations {
	out := map[string]admissionregistrationv1.RuleWithOperations{}
	for _, r := range in {
		out[r.APIGroups[0]] = r
	}
	return out
}

// TestBuildValidatingPolicy registers a ValidatingPolicy's resource rules,
// with their operations, plus those of its autogen copies, in the
// fail-closed validating webhook; a NamespacedValidatingPolicy's only for
// namespaced objects, in the fail-closed webhook of its namespace.
func TestBuildValidatingPolicy(t *testing.T) {
	rule := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	vpol := &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "v"}, Spec: policiesv1.ValidatingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{rule}},
		Validations:      []admissionregistrationv1.Validation{{Expression: "true"}},
	}}
	nvpol := &policiesv1.NamespacedValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "team-a"}, Spec: *vpol.Spec.DeepCopy()}
	nvpol.Spec.MatchConstraints.ResourceRules[0].Resources = []string{"configmaps"}
	cfgs, err := Build([]kyvernov1.PolicyInterface{vpol, nvpol}, resolver, Settings{Target: Target{URL: "https://x"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range listRules(cfgs.Validating.Webhooks) {
		name, r, _ := strings.Cut(w, "|")
		got[name] = r
	}
	teamA := namespacedHook(ValidateWebhookFail, "team-a")
	want := map[string]string{
		ValidateWebhookFail + " /pods":                     "[CREATE UPDATE] *",
		ValidateWebhookFail + " /pods/ephemeralcontainers": "[CREATE UPDATE] *",
		teamA + " /configmaps":                             "[CREATE UPDATE] Namespaced",
		ValidateWebhookFail + " apps/deployments":          "[CREATE UPDATE] *",
		ValidateWebhookFail + " apps/daemonsets":           "[CREATE UPDATE] *",
		ValidateWebhookFail + " apps/replicasets":          "[CREATE UPDATE] *",
		ValidateWebhookFail + " apps/statefulsets":         "[CREATE UPDATE] *",
		ValidateWebhookFail + " batch/jobs":                "[CREATE UPDATE] *",
		ValidateWebhookFail + " batch/cronjobs":            "[CREATE UPDATE] *",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %v\nwant %v", got, want)
	}
	if len(cfgs.Mutating.Webhooks) != 0 {
		t.Error("a ValidatingPolicy registered a mutating webhook")
	}
}

// TestBuildMutatingPolicy registers a MutatingPolicy's resource rules, and
// those of its autogen copies, in the mutating webhook of its failure
// policy (reinvoked if needed), never in the validating one; a
// NamespacedMutatingPolicy's only for namespaced objects, in the webhook
// of its namespace; a rule with operation "*" as CREATE and UPDATE.
func TestBuildMutatingPolicy(t *testing.T) {
	rule := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{"CREATE"},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	ignore := admissionregistrationv1.Ignore
	mpol := &policiesv1.MutatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: policiesv1.MutatingPolicySpec{
		FailurePolicy:    &ignore,
		MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{rule}},
		Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
			ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "Object{}"}}},
	}}
	nmpol := &policiesv1.NamespacedMutatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "team-a"}, Spec: *mpol.Spec.DeepCopy()}
	nmpol.Spec.FailurePolicy = nil
	nmpol.Spec.MatchConstraints.ResourceRules[0].Resources = []string{"configmaps"}
	nmpol.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{"*"}
	cfgs, err := Build([]kyvernov1.PolicyInterface{mpol, nmpol}, resolver, Settings{Target: Target{URL: "https://x"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range cfgs.Mutating.Webhooks {
		if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
			t.Errorf("%s: reinvocationPolicy %v, want IfNeeded", w.Name, w.ReinvocationPolicy)
		}
		for _, r := range w.Rules {
			for _, res := range r.Resources {
				got[hookName(w.Name, w.NamespaceSelector)+" "+r.APIGroups[0]+"/"+res] = fmt.Sprint(r.Operations, " ", *r.Scope)
			}
		}
	}
	want := map[string]string{
		MutateWebhookIgnore + " /pods":                               "[CREATE] *",
		MutateWebhookIgnore + " /pods/ephemeralcontainers":           "[CREATE] *",
		MutateWebhookIgnore + " apps/deployments":                    "[CREATE] *",
		MutateWebhookIgnore + " apps/daemonsets":                     "[CREATE] *",
		MutateWebhookIgnore + " apps/replicasets":                    "[CREATE] *",
		MutateWebhookIgnore + " apps/statefulsets":                   "[CREATE] *",
		MutateWebhookIgnore + " batch/jobs":                          "[CREATE] *",
		MutateWebhookIgnore + " batch/cronjobs":                      "[CREATE] *",
		namespacedHook(MutateWebhookFail, "team-a") + " /configmaps": "[CREATE UPDATE] Namespaced",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %v\nwant %v", got, want)
	}
	if len(cfgs.Validating.Webhooks) != 0 {
		t.Error("a MutatingPolicy registered a validating webhook")
	}
}

// TestBuildMutatingPolicyMutateExisting registers a mutate-existing
// MutatingPolicy's matchConstraints in the validating webhook, whose
// allowed requests become UpdateRequests; in the mutating webhook only
// when it also mutates at admission; a namespaced one's in the webhooks of
// its namespace.
func TestBuildMutatingPolicyMutateExisting(t *testing.T) {
	on, off := true, false
	rule := func(res string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{res}}}}
	}
	spec := func(res string, admission bool) policiesv1.MutatingPolicySpec {
		return policiesv1.MutatingPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{rule(res, "CREATE", "UPDATE")}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "Object{}"}}},
			EvaluationConfiguration: &policiesv1.MutatingPolicyEvaluationConfiguration{
				Admission:      &policiesv1.AdmissionConfiguration{Enabled: &admission},
				MutateExisting: &policiesv1.MutateExistingConfiguration{Enabled: &on},
			},
		}
	}
	existingOnly := &policiesv1.MutatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "existing-only"}, Spec: spec("namespaces", off)}
	both := &policiesv1.NamespacedMutatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "both", Namespace: "team-a"}, Spec: spec("configmaps", on)}
	cfgs, err := Build([]kyvernov1.PolicyInterface{existingOnly, both}, resolver, Settings{Target: Target{URL: "https://x"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ws := range [][]string{listRules(cfgs.Validating.Webhooks), listRules(cfgs.Mutating.Webhooks)} {
		for _, w := range ws {
			name, r, _ := strings.Cut(w, "|")
			got[name] = r
		}
	}
	want := map[string]string{
		ValidateWebhookFail + " /namespaces":                           "[CREATE UPDATE] *",
		namespacedHook(ValidateWebhookFail, "team-a") + " /configmaps": "[CREATE UPDATE] Namespaced",
		namespacedHook(MutateWebhookFail, "team-a") + " /configmaps":   "[CREATE UPDATE] Namespaced",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %v\nwant %v", got, want)
	}
}

// hookName is a webhook's name, a namespaced policies' one's as
// namespacedHook names it: its name ends in a hash of its rules.
func hookName(name string, sel *metav1.LabelSelector) string {
	base, _, ok := strings.Cut(name, "-namespaced-")
	if !ok {
		return name
	}
	for _, e := range sel.MatchExpressions {
		if e.Key == "kubernetes.io/metadata.name" && e.Operator == metav1.LabelSelectorOpIn {
			return namespacedHook(base, e.Values...)
		}
	}
	return name + "[no namespaces selected]"
}

// namespacedHook names the webhook of the namespaced policies of the
// namespaces in a test's expectations.
func namespacedHook(base string, namespaces ...string) string {
	return base + "-namespaced" + fmt.Sprint(namespaces)
}

// listRules lists "webhook group/resource|operations scope" of each
// resource of each webhook's rules.
func listRules(webhooks any) []string {
	var out []string
	add := func(name string, rules []admissionregistrationv1.RuleWithOperations) {
		for _, r := range rules {
			for _, res := range r.Resources {
				out = append(out, name+" "+r.APIGroups[0]+"/"+res+"|"+fmt.Sprint(r.Operations, " ", *r.Scope))
			}
		}
	}
	switch ws := webhooks.(type) {
	case []admissionregistrationv1.ValidatingWebhook:
		for _, w := range ws {
			add(hookName(w.Name, w.NamespaceSelector), w.Rules)
		}
	case []admissionregistrationv1.MutatingWebhook:
		for _, w := range ws {
			add(hookName(w.Name, w.NamespaceSelector), w.Rules)
		}
	}
	return out
}

// TestBuildImageValidatingPolicy: an ImageValidatingPolicy registers its
// resource rules (and its Pod controllers') with the validating webhook of
// its failurePolicy, and with the mutating one only while mutateDigest is
// on; a namespaced one for namespaced resources, in its namespace's.
func TestBuildImageValidatingPolicy(t *testing.T) {
	rule := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	noPins := false
	ivpol := &policiesv1.ImageValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "i"}, Spec: policiesv1.ImageValidatingPolicySpec{
		MatchConstraints:     &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{rule}},
		AutogenConfiguration: &policiesv1.ImageValidatingPolicyAutogenConfiguration{PodControllers: &policiesv1.PodControllersGenerationConfiguration{Controllers: []string{"deployments"}}},
	}}
	nivpol := &policiesv1.NamespacedImageValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "team-a"}, Spec: *ivpol.Spec.DeepCopy()}
	nivpol.Spec.AutogenConfiguration = nil
	nivpol.Spec.MatchConstraints.ResourceRules[0].Resources = []string{"replicationcontrollers"}
	nivpol.Spec.ValidationConfigurations = &policiesv1.ValidationConfiguration{MutateDigest: &noPins}
	cfgs, err := Build([]kyvernov1.PolicyInterface{ivpol, nivpol}, resolver, Settings{Target: Target{URL: "https://x"}})
	if err != nil {
		t.Fatal(err)
	}
	validating, mutating := map[string]string{}, map[string]string{}
	add := func(got map[string]string, name string, r admissionregistrationv1.RuleWithOperations) {
		for _, res := range r.Resources {
			got[name+" "+r.APIGroups[0]+"/"+res] = fmt.Sprint(r.Operations, " ", *r.Scope)
		}
	}
	for _, w := range cfgs.Validating.Webhooks {
		for _, r := range w.Rules {
			add(validating, hookName(w.Name, w.NamespaceSelector), r)
		}
	}
	for _, w := range cfgs.Mutating.Webhooks {
		for _, r := range w.Rules {
			add(mutating, hookName(w.Name, w.NamespaceSelector), r)
		}
	}
	wantValidating := map[string]string{
		ValidateWebhookFail + " /pods":                                             "[CREATE UPDATE] *",
		ValidateWebhookFail + " /pods/ephemeralcontainers":                         "[CREATE UPDATE] *",
		ValidateWebhookFail + " apps/deployments":                                  "[CREATE UPDATE] *",
		namespacedHook(ValidateWebhookFail, "team-a") + " /replicationcontrollers": "[CREATE UPDATE] Namespaced",
	}
	wantMutating := map[string]string{
		MutateWebhookFail + " /pods":                     "[CREATE UPDATE] *",
		MutateWebhookFail + " /pods/ephemeralcontainers": "[CREATE UPDATE] *",
		MutateWebhookFail + " apps/deployments":          "[CREATE UPDATE] *",
	}
	if !reflect.DeepEqual(validating, wantValidating) {
		t.Errorf("validating rules:\n got %v\nwant %v", validating, wantValidating)
	}
	if !reflect.DeepEqual(mutating, wantMutating) {
		t.Errorf("mutating rules:\n got %v\nwant %v", mutating, wantMutating)
	}
}

// TestBuildFineGrained: a policy with webhook matchConditions gets a
// webhook of its own in each configuration its rules need, carrying its
// conditions only, on its own path, named after it (a Policy's with its
// namespace), sorted after its failure policy's shared webhook; the
// shared webhooks carry no conditions and none of its kinds.
func TestBuildFineGrained(t *testing.T) {
	ignore := kyvernov1.Ignore
	timeout := int32(20)
	conditions := []admissionregistrationv1.MatchCondition{{Name: "team", Expression: "object.metadata.labels['team'] == 'a'"}}
	mutateRule := kyvernov1.Rule{Name: "m",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{Kinds: []string{"Deployment"}}}}},
		Mutation:       &kyvernov1.Mutation{}}
	nsPolicy := &kyvernov1.Policy{TypeMeta: metav1.TypeMeta{APIVersion: "kyverno.io/v1", Kind: "Policy"},
		ObjectMeta: metav1.ObjectMeta{Name: "shop-pods", Namespace: "shop"},
		Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{validateRule(nil, "Pod")},
			WebhookConfiguration: &kyvernov1.WebhookConfiguration{FailurePolicy: &ignore, MatchConditions: conditions}}}
	policies := []kyvernov1.PolicyInterface{
		clusterPolicy("pods", validateRule(nil, "Pod"), nil),
		clusterPolicy("team-a", validateRule(nil, "Namespace"), func(s *kyvernov1.Spec) {
			s.WebhookConfiguration = &kyvernov1.WebhookConfiguration{MatchConditions: conditions, TimeoutSeconds: &timeout}
		}),
		clusterPolicy("team-a-mutate", mutateRule, func(s *kyvernov1.Spec) {
			s.WebhookConfiguration = &kyvernov1.WebhookConfiguration{MatchConditions: conditions}
		}),
		nsPolicy,
	}
	cfgs, err := Build(policies, resolver, Settings{Target: Target{URL: "https://127.0.0.1:9443"}})
	if err != nil {
		t.Fatal(err)
	}
	type hook struct {
		name, url  string
		resources  []string
		conditions []admissionregistrationv1.MatchCondition
		timeout    int32
	}
	var got []hook
	for _, w := range cfgs.Validating.Webhooks {
		got = append(got, hook{w.Name, *w.ClientConfig.URL, w.Rules[0].Resources, w.MatchConditions, *w.TimeoutSeconds})
	}
	for _, w := range cfgs.Mutating.Webhooks {
		got = append(got, hook{w.Name, *w.ClientConfig.URL, w.Rules[0].Resources, w.MatchConditions, *w.TimeoutSeconds})
	}
	want := []hook{
		{"validate.charter.svc-fail", "https://127.0.0.1:9443/validate/fail", []string{"pods", "pods/ephemeralcontainers", "replicationcontrollers"}, nil, 10},
		{"validate.charter.svc-fail-finegrained-team-a", "https://127.0.0.1:9443/validate/fail/finegrained/team-a", []string{"namespaces"}, conditions, 20},
		{"validate.charter.svc-ignore-finegrained-shop-shop-pods", "https://127.0.0.1:9443/validate/ignore/finegrained/shop/shop-pods", []string{"pods", "pods/ephemeralcontainers", "replicationcontrollers"}, conditions, 10},
		{"mutate.charter.svc-fail-finegrained-team-a-mutate", "https://127.0.0.1:9443/mutate/fail/finegrained/team-a-mutate", []string{"deployments"}, conditions, 10},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("webhooks:\n got %+v\nwant %+v", got, want)
	}
	// The Policy's own webhook selects its namespace only.
	if sel := cfgs.Validating.Webhooks[2].NamespaceSelector; fmt.Sprint(sel.MatchExpressions) != "[{kubernetes.io/metadata.name In [shop]}]" {
		t.Errorf("%s: namespaceSelector %v, want its namespace only", cfgs.Validating.Webhooks[2].Name, sel.MatchExpressions)
	}
	if sel := cfgs.Validating.Webhooks[0].NamespaceSelector; len(sel.MatchExpressions) != 0 {
		t.Errorf("shared webhook: namespaceSelector %v, want every namespace", sel.MatchExpressions)
	}
}

// TestFineGrainedNamesAreValidAndDistinct: the policies' own webhooks never
// share a name (a Policy "b" in "team-a" and a ClusterPolicy "team-a-b")
// and never pass the API server's 253-character limit, so one policy cannot
// make the API server refuse the configuration every policy's webhook is in.
func TestFineGrainedNamesAreValidAndDistinct(t *testing.T) {
	conditions := []admissionregistrationv1.MatchCondition{{Name: "team", Expression: "true"}}
	withConditions := func(s *kyvernov1.Spec) {
		s.WebhookConfiguration = &kyvernov1.WebhookConfiguration{MatchConditions: conditions}
	}
	namespaced := func(ns, name string) *kyvernov1.Policy {
		return &kyvernov1.Policy{TypeMeta: metav1.TypeMeta{APIVersion: "kyverno.io/v1", Kind: "Policy"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{validateRule(nil, "Pod")},
				WebhookConfiguration: &kyvernov1.WebhookConfiguration{MatchConditions: conditions}}}
	}
	long := strings.Repeat("p", 240)
	policies := []kyvernov1.PolicyInterface{
		clusterPolicy("team-a-b", validateRule(nil, "Pod"), withConditions),
		namespaced("team-a", "b"),
		clusterPolicy("plain", validateRule(nil, "Pod"), withConditions),
		namespaced(strings.Repeat("n", 63), long),
		namespaced(strings.Repeat("n", 63), long+"q"),
	}
	cfgs, err := Build(policies, resolver, Settings{Target: Target{URL: "https://127.0.0.1:9443"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	paths := map[string]bool{}
	for _, w := range cfgs.Validating.Webhooks {
		if len(w.Name) > 253 {
			t.Errorf("webhook name of %d characters: %s", len(w.Name), w.Name)
		}
		if seen[w.Name] {
			t.Errorf("two webhooks named %s", w.Name)
		}
		seen[w.Name] = true
		paths[*w.ClientConfig.URL] = true
	}
	if len(cfgs.Validating.Webhooks) != 5 || len(paths) != 5 {
		t.Fatalf("want the 5 policies' own webhooks on distinct paths (the shared one has no rules), got %d webhooks on %d paths", len(cfgs.Validating.Webhooks), len(paths))
	}
	// A name that is already distinct and short enough stays readable.
	if !seen["validate.charter.svc-fail-finegrained-plain"] {
		t.Errorf("the readable name of ClusterPolicy plain changed: %v", seen)
	}
}
