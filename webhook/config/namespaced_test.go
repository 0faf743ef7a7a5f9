package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

func tenantPolicy(ns, name string, rule kyvernov1.Rule, mutate func(*kyvernov1.Spec)) *kyvernov1.Policy {
	p := &kyvernov1.Policy{TypeMeta: metav1.TypeMeta{APIVersion: "kyverno.io/v1", Kind: "Policy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{rule}}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

// hookSummary is what one webhook does: its rules, timeout, failure
// policy, path and the namespaces it selects.
func hookSummary(w admissionregistrationv1.ValidatingWebhook) string {
	path := ""
	if w.ClientConfig.URL != nil {
		_, path, _ = strings.Cut(*w.ClientConfig.URL, "https://x")
	}
	return fmt.Sprintf("%s %s timeout=%d selector=%v rules=%s", *w.FailurePolicy, path, *w.TimeoutSeconds,
		w.NamespaceSelector.MatchExpressions, strings.Join(listRules([]admissionregistrationv1.ValidatingWebhook{{Name: "", Rules: w.Rules}}), ";"))
}

// TestNamespacedPolicyCannotWidenSharedWebhooks is the tenant's attack on
// the webhook configuration: a Policy matching every kind with
// failurePolicy Fail, the longest timeout and a cluster-scoped kind. The
// shared webhooks stay exactly what the cluster-wide policies make them;
// the tenant's webhook selects its namespace only (and the excluded
// namespaces stay out), registers no cluster-scoped resource, and its
// timeout is its own.
func TestNamespacedPolicyCannotWidenSharedWebhooks(t *testing.T) {
	max := MaxTimeoutSeconds
	settings := Settings{Target: Target{URL: "https://x"}, ExcludedNamespaces: []string{"kube-system"}}
	platform := []kyvernov1.PolicyInterface{clusterPolicy("pods", validateRule(nil, "Pod"), nil)}
	before, err := Build(platform, resolver, settings)
	if err != nil {
		t.Fatal(err)
	}
	attack := tenantPolicy("team-a", "everything", validateRule(nil, "*", "Namespace"), func(s *kyvernov1.Spec) {
		s.WebhookConfiguration = &kyvernov1.WebhookConfiguration{TimeoutSeconds: &max}
	})
	mutateAll := tenantPolicy("team-a", "mutate-everything", kyvernov1.Rule{Name: "m",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{ResourceDescription: kyvernov1.ResourceDescription{Kinds: []string{"*"}}}}},
		Mutation:       &kyvernov1.Mutation{}}, nil)
	after, err := Build(append(platform, attack, mutateAll), resolver, settings)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hookSummary(after.Validating.Webhooks[0]), hookSummary(before.Validating.Webhooks[0]); got != want {
		t.Errorf("the tenant's policy changed the shared webhook:\n got %s\nwant %s", got, want)
	}
	if len(after.Validating.Webhooks) != 2 || len(after.Mutating.Webhooks) != 1 {
		t.Fatalf("want the shared validating webhook and one each of team-a's, got %d validating, %d mutating",
			len(after.Validating.Webhooks), len(after.Mutating.Webhooks))
	}
	wantSelector := "[{kubernetes.io/metadata.name In [team-a]} {kubernetes.io/metadata.name NotIn [kube-system]}]"
	if got, want := hookSummary(after.Validating.Webhooks[1]),
		"Fail /validate/fail/namespaced timeout=30 selector="+wantSelector+" rules= */*|[CONNECT CREATE DELETE UPDATE] Namespaced"; got != want {
		t.Errorf("team-a's validating webhook:\n got %s\nwant %s", got, want)
	}
	m := after.Mutating.Webhooks[0]
	if fmt.Sprint(m.NamespaceSelector.MatchExpressions) != wantSelector || !strings.HasSuffix(*m.ClientConfig.URL, "/mutate/fail/namespaced") ||
		*m.Rules[0].Scope != admissionregistrationv1.NamespacedScope || *m.TimeoutSeconds != DefaultTimeoutSeconds {
		t.Errorf("team-a's mutating webhook: %s selector %v scope %s timeout %d", *m.ClientConfig.URL, m.NamespaceSelector.MatchExpressions, *m.Rules[0].Scope, *m.TimeoutSeconds)
	}
}

// TestNamespacedWebhooksAreSharedByEqualNamespaces: namespaces whose
// namespaced policies register the same rules and timeout share one
// webhook per failure policy, however many there are; a namespace whose
// rules differ has its own, so the others' do not change with it.
func TestNamespacedWebhooksAreSharedByEqualNamespaces(t *testing.T) {
	ignore := kyvernov1.Ignore
	var policies []kyvernov1.PolicyInterface
	var tenants []string
	for i := range 1000 {
		ns := fmt.Sprintf("tenant-%04d", i)
		tenants = append(tenants, ns)
		policies = append(policies, tenantPolicy(ns, "pods", validateRule(nil, "Pod"), nil),
			tenantPolicy(ns, "deployments", validateRule(nil, "Deployment"), func(s *kyvernov1.Spec) { s.FailurePolicy = &ignore }))
	}
	// team-x also checks exec: its webhook is its own.
	policies = append(policies, tenantPolicy("team-x", "pods", validateRule(nil, "Pod"), nil),
		tenantPolicy("team-x", "exec", validateRule(nil, "Pod/exec"), nil))
	cfgs, err := Build(policies, resolver, Settings{Target: Target{URL: "https://x"}})
	if err != nil {
		t.Fatal(err)
	}
	type hook struct {
		fp         admissionregistrationv1.FailurePolicyType
		namespaces string
		exec       bool
	}
	var got []hook
	seen := map[string]bool{}
	for _, w := range cfgs.Validating.Webhooks {
		if seen[w.Name] || len(w.Name) > 253 {
			t.Errorf("webhook name %q is repeated or too long", w.Name)
		}
		seen[w.Name] = true
		h := hook{fp: *w.FailurePolicy, namespaces: "?"}
		if e := w.NamespaceSelector.MatchExpressions; len(e) == 1 {
			h.namespaces = strings.Join(e[0].Values, ",")
		}
		h.exec = strings.Contains(strings.Join(listRules([]admissionregistrationv1.ValidatingWebhook{w}), ";"), "pods/exec")
		got = append(got, h)
	}
	all := strings.Join(tenants, ",")
	want := []hook{{admissionregistrationv1.Fail, all, false}, {admissionregistrationv1.Fail, "team-x", true}, {admissionregistrationv1.Ignore, all, false}}
	slices.SortFunc(got, func(a, b hook) int { return strings.Compare(string(a.fp)+a.namespaces, string(b.fp)+b.namespaces) })
	slices.SortFunc(want, func(a, b hook) int { return strings.Compare(string(a.fp)+a.namespaces, string(b.fp)+b.namespaces) })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("want the 1000 equal tenants in one webhook per failure policy and team-x in one of its own; got %d webhooks:", len(got))
		for _, h := range got {
			t.Errorf("  %s exec=%v %.80s", h.fp, h.exec, h.namespaces)
		}
	}
}
