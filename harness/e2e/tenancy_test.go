package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Namespaces of the tenancy specs: charter's own, and two tenants.
const (
	tenancyCharterNamespace = "e2e-tenancy-charter"
	teamA                   = "e2e-team-a"
	teamB                   = "e2e-team-b"
)

// teamAPolicy is what a namespace owner of team-a may write: a Policy in
// its own namespace that denies Pods labelled blocked and labels every
// ConfigMap. Its kinds name no namespace, as a tenant would write them.
const teamAPolicy = `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: team-rules, namespace: e2e-team-a}
spec:
  rules:
  - name: no-blocked-pods
    match: {any: [{resources: {kinds: [Pod, Namespace], selector: {matchLabels: {blocked: "true"}}}}]}
    validate:
      failureAction: Enforce
      message: team-a allows no blocked Pods
      deny: {}
  - name: label-configmaps
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            tenant: team-a
`

var _ = Describe("Tenancy", Label("tenancy"), Ordered, func() {
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{tenancyCharterNamespace, teamA, teamB} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, teamA, teamB)
		startCharterWith(ctx, tenancyCharterNamespace, "admission")

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

	It("never blocks a cluster-scoped object, its own Namespace included", func(ctx SpecContext) {
		var ns corev1.Namespace
		Expect(cl.Get(ctx, client.ObjectKey{Name: teamA}, &ns)).To(Succeed())
		ns.Labels = map[string]string{"blocked": "true"}
		Expect(cl.Update(ctx, &ns)).To(Succeed())
	}, SpecTimeout(30*time.Second))

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

// tenantPod is a Pod in namespace, labelled blocked when asked.
func tenantPod(namespace, name string, blocked bool) *corev1.Pod {
	p := newPod(name, nil)
	p.Namespace = namespace
	if blocked {
		p.Labels = map[string]string{"blocked": "true"}
	}
	return p
}
