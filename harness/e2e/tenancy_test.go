package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// Namespaces of the tenancy specs: charter's own, and two tenants.
const (
	tenancyCharterNamespace = "e2e-tenancy-charter"
	teamA                   = "e2e-team-a"
	teamB                   = "e2e-team-b"
)

// teamAPolicy is what a namespace owner of team-a may write: a Policy in
// its own namespace that denies Pods labelled blocked, audits that Pods
// name an owner, and labels every ConfigMap. Its kinds name no namespace,
// as a tenant would write them.
const teamAPolicy = `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: team-rules, namespace: e2e-team-a}
spec:
  rules:
  - name: no-blocked-pods
    match: {any: [{resources: {kinds: [Pod], selector: {matchLabels: {blocked: "true"}}}}]}
    validate:
      failureAction: Enforce
      message: team-a allows no blocked Pods
      deny: {}
  - name: audit-owner
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      failureAction: Audit
      message: team-a's Pods name an owner
      pattern: {metadata: {labels: {owner: "?*"}}}
  - name: label-configmaps
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            tenant: team-a
`

// teamANamespacePolicy is team-a trying to block Namespaces, its own
// among them: a namespaced Policy may not name a cluster-scoped kind
// (Kyverno's "Cluster wide resource ... not allowed in namespaced
// policy"), and the engine would never apply it to one.
const teamANamespacePolicy = `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: block-namespaces, namespace: e2e-team-a}
spec:
  rules:
  - name: no-blocked-namespaces
    match: {any: [{resources: {kinds: [Pod, Namespace], selector: {matchLabels: {blocked: "true"}}}}]}
    validate:
      failureAction: Enforce
      message: team-a blocks Namespaces
      deny: {}
`

// tenantsAudit is the platform team's ClusterPolicy for both tenants, so
// each tenant's Pods have a report whatever team-a's Policy says.
const tenantsAudit = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: tenants-audit}
spec:
  rules:
  - name: check-owner
    match: {any: [{resources: {kinds: [Pod], namespaces: [e2e-team-a, e2e-team-b]}}]}
    validate:
      failureAction: Audit
      message: Pods name an owner
      pattern: {metadata: {labels: {owner: "?*"}}}
`

var _ = Describe("Tenancy", Label("tenancy"), Ordered, inClusterPriority, func() {
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{tenancyCharterNamespace, teamA, teamB} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, teamA, teamB)
		useCharter(ctx, tenancyCharterNamespace, "admission,reports")

		audit := clusterPolicy(tenantsAudit)
		Eventually(func() error { return client.IgnoreAlreadyExists(cl.Create(ctx, audit)) }).
			WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, audit))).To(Succeed()) })
		var p kyvernov1.Policy
		Expect(yaml.UnmarshalStrict([]byte(teamAPolicy), &p)).To(Succeed())
		// The policy webhook may not answer yet: retry until it does.
		Eventually(func() error { return client.IgnoreAlreadyExists(cl.Create(ctx, &p)) }).
			WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, &p))).To(Succeed()) })
		// Wait until the policy is served: team-a's blocked Pod is refused.
		Eventually(func() error {
			return refusedByCharter(ctx, tenantPod(teamA, "probe", true))
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, NodeTimeout(3*time.Minute))

	It("blocks in team-a with the policy's message", func(ctx SpecContext) {
		err := cl.Create(ctx, tenantPod(teamA, "blocked", true))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("resource Pod/" + teamA + "/blocked was blocked"))
		Expect(err.Error()).To(ContainSubstring("team-a allows no blocked Pods"))
		Expect(cl.Create(ctx, tenantPod(teamA, "fine", false))).To(Succeed())
	}, SpecTimeout(30*time.Second))

	It("leaves team-b alone", func(ctx SpecContext) {
		Expect(cl.Create(ctx, tenantPod(teamB, "blocked", true))).To(Succeed())
	}, SpecTimeout(30*time.Second))

	It("refuses a Policy naming a cluster-scoped kind, and never blocks its own Namespace", func(ctx SpecContext) {
		By("team-a's Policy naming Namespace is refused when written, as Kyverno refuses it")
		var p kyvernov1.Policy
		Expect(yaml.UnmarshalStrict([]byte(teamANamespacePolicy), &p)).To(Succeed())
		err := cl.Create(ctx, &p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`admission webhook "` + policyValidationWebhook + `" denied the request`))
		Expect(err.Error()).To(ContainSubstring(`spec.rules[0].match.any[0].resources.kinds[1]: Cluster wide resource 'Namespace' not allowed in namespaced policy`))

		By("team-a's own Namespace, labelled as team-a's Policy blocks Pods, takes the update")
		var ns corev1.Namespace
		Expect(cl.Get(ctx, client.ObjectKey{Name: teamA}, &ns)).To(Succeed())
		ns.Labels = map[string]string{"blocked": "true"}
		Expect(cl.Update(ctx, &ns)).To(Succeed())
	}, SpecTimeout(30*time.Second))

	It("reports team-a's Policy results for team-a's Pods only", func(ctx SpecContext) {
		a, b := tenantPod(teamA, "reported", false), tenantPod(teamB, "reported", false)
		Expect(cl.Create(ctx, a)).To(Succeed())
		Expect(cl.Create(ctx, b)).To(Succeed())
		waitReport(ctx, a, "tenants-audit/check-owner=fail", teamA+"/team-rules/audit-owner=fail")
		waitReport(ctx, b, "tenants-audit/check-owner=fail")
	}, SpecTimeout(60*time.Second))

	It("mutates in team-a and never touches team-b", func(ctx SpecContext) {
		for _, ns := range []string{teamA, teamB} {
			Expect(cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}})).To(Succeed())
		}
		var got corev1.ConfigMap
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: teamA, Name: "settings"}, &got)).To(Succeed())
		Expect(got.Labels).To(HaveKeyWithValue("tenant", "team-a"))
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: teamB, Name: "settings"}, &got)).To(Succeed())
		Expect(got.Labels).NotTo(HaveKey("tenant"))
	}, SpecTimeout(30*time.Second))
})

// Exceptions to team-a's policy for the Pod "exempt": one written by
// team-a itself, in its own namespace, which charter does not trust; one
// by the platform team in charter's namespace, which it does (charter
// serve trusts only its own namespace unless --exception-namespaces says
// otherwise).
const (
	tenantException = `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: let-me-in, namespace: e2e-team-a}
spec:
  exceptions:
  - {policyName: e2e-team-a/team-rules, ruleNames: [no-blocked-pods]}
  match: {any: [{resources: {kinds: [Pod], namespaces: [e2e-team-a], names: [exempt]}}]}
`
	platformException = `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: let-exempt-in, namespace: e2e-tenancy-charter}
spec:
  exceptions:
  - {policyName: e2e-team-a/team-rules, ruleNames: [no-blocked-pods]}
  match: {any: [{resources: {kinds: [Pod], namespaces: [e2e-team-a], names: [exempt]}}]}
`
)

var _ = Describe("Tenancy: PolicyExceptions", Label("tenancy"), Ordered, inClusterPriority, func() {
	var (
		cl        client.Client
		charterNS string
	)

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{tenancyCharterNamespace, teamA} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, teamA)
		charterNS = useCharter(ctx, tenancyCharterNamespace, "admission")

		var p kyvernov1.Policy
		Expect(yaml.UnmarshalStrict([]byte(teamAPolicy), &p)).To(Succeed())
		Eventually(func() error { return client.IgnoreAlreadyExists(cl.Create(ctx, &p)) }).
			WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, &p))).To(Succeed()) })
		Eventually(func() error {
			return refusedByCharter(ctx, tenantPod(teamA, "probe", true))
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, NodeTimeout(3*time.Minute))

	It("ignores a tenant's own exception, with an event on it saying why", func(ctx SpecContext) {
		ex := policyException(tenantException)
		Expect(cl.Create(ctx, ex)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, ex))).To(Succeed()) })

		ignoredNotes := func(g Gomega) []string {
			var events eventsv1.EventList
			g.Expect(cl.List(ctx, &events, client.InNamespace(teamA))).To(Succeed())
			var notes []string
			for _, ev := range events.Items {
				if ev.Regarding.Kind == "PolicyException" && ev.Regarding.Name == "let-me-in" && ev.Reason == "ExceptionIgnored" {
					notes = append(notes, ev.Note)
				}
			}
			return notes
		}
		// One event, from the admission leader, however many charter
		// processes watch the exception (nine in the cluster).
		Eventually(func(g Gomega) {
			g.Expect(ignoredNotes(g)).To(ConsistOf(ContainSubstring(
				`only from namespace ` + charterNS + ` (--exception-namespaces=` + charterNS + `), not from "` + teamA + `"`)))
		}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) { g.Expect(ignoredNotes(g)).To(HaveLen(1)) }).
			WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(refusedByCharter(ctx, tenantPod(teamA, "exempt", true))).To(Succeed())
	}, SpecTimeout(60*time.Second))

	It("honours the platform team's exception from charter's namespace", func(ctx SpecContext) {
		ex := policyException(platformException)
		ex.Namespace = charterNS
		Expect(cl.Create(ctx, ex)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, ex))).To(Succeed()) })

		// The exception reaches the policy cache asynchronously.
		Eventually(func() error {
			return cl.Create(ctx, tenantPod(teamA, "exempt", true), client.DryRunAll)
		}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(refusedByCharter(ctx, tenantPod(teamA, "not-exempt", true))).To(Succeed())
	}, SpecTimeout(60*time.Second))
})

func policyException(manifest string) *kyvernov2.PolicyException {
	var ex kyvernov2.PolicyException
	Expect(yaml.UnmarshalStrict([]byte(manifest), &ex)).To(Succeed())
	return &ex
}

// tenantPod is a Pod in namespace, labelled blocked when asked.
func tenantPod(namespace, name string, blocked bool) *corev1.Pod {
	p := newPod(name, nil)
	p.Namespace = namespace
	if blocked {
		p.Labels = map[string]string{"blocked": "true"}
	}
	return p
}
