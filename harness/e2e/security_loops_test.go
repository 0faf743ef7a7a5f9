package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Names of the loop-protection specs: charter's namespace, and the
// tenant's, where it holds admin and may write Policies.
const (
	secLoopsCharterNS = "e2e-sec-loops-charter"
	secLoopsTeam      = "e2e-sec-loops-team"
	secLoopsTenant    = "e2e-sec-loops-tenant"
)

// secLoopsCopy is the tenant's Policy that copies every ConfigMap named
// seed*: the copy, seed-copy, is a ConfigMap named seed* too. Charter
// writes it as the namespace's charter-policy ServiceAccount; were that
// write anyone's, it would trigger the rule again (seed-copy-copy, and so
// on until the name is too long).
const secLoopsCopy = `apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: copy-seeds, namespace: ` + secLoopsTeam + `}
spec:
  rules:
  - name: copy
    match: {any: [{resources: {kinds: [ConfigMap], names: ["seed*"]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: "{{ request.object.metadata.name }}-copy"
      namespace: ` + secLoopsTeam + `
      data: {data: {copied: "true"}}
`

// secLoopsAudit is the platform's ClusterPolicy that records every
// ConfigMap named audited* in the tenant's namespace with a ConfigMap of
// its own, written with charter's identity. skipBackgroundRequests is its
// default, true: charter's own writes do not trigger it.
const secLoopsAudit = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-sec-loops-audit}
spec:
  # It records who wrote the ConfigMap (request.userInfo): admission only.
  background: false
  rules:
  - name: record
    match: {any: [{resources: {kinds: [ConfigMap], names: ["audited*"], namespaces: [` + secLoopsTeam + `]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: "record-{{ request.object.metadata.name }}"
      namespace: ` + secLoopsTeam + `
      data: {data: {by: "{{ request.userInfo.username }}"}}
`

// Charter acts for a namespaced policy as its namespace's charter-policy
// ServiceAccount, so admission must know those writes for the background
// controller's own, or a Policy whose generated kind is its trigger kind
// feeds itself. But the tenant holds that ServiceAccount too (admin may
// request its tokens): were its writes charter's own for every policy, a
// tenant writing as it would slip past the platform's generate rules.
var _ = Describe("Security: loops", Label("security"), Ordered, ContinueOnFailure, func() {
	var tenant client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		createNamespaces(ctx, secLoopsCharterNS, secLoopsTeam)
		By("making " + secLoopsTenant + " the admin of " + secLoopsTeam + ", who gives its " + rightsPolicySA + " admin")
		tenant = namespaceAdmin(ctx, secLoopsTenant, secLoopsTeam, policyWriter(kyvernov1.GroupVersion.Group, "policies"))
		grantPolicyServiceAccountAdmin(ctx, tenant, secLoopsTeam)
		startCharterWith(ctx, secLoopsCharterNS, "admission,background")
		waitPolicyWebhook(ctx)
	}, NodeTimeout(5*time.Minute))

	exists := func(ctx context.Context, name string) func(Gomega) bool {
		return func(g Gomega) bool {
			err := suite.client.Get(ctx, client.ObjectKey{Namespace: secLoopsTeam, Name: name}, &corev1.ConfigMap{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			return err == nil
		}
	}

	It("a tenant's Policy whose generated kind is its trigger kind does not feed itself", func(ctx SpecContext) {
		var p kyvernov1.Policy
		Expect(yaml.UnmarshalStrict([]byte(secLoopsCopy), &p)).To(Succeed())
		createEventually(ctx, tenant, &p)
		triggerUntilRequested(ctx, tenant, secLoopsTeam, secLoopsCharterNS,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secLoopsTeam, Name: "seed"}}, exists(ctx, "seed-copy"))
		Eventually(exists(ctx, "seed-copy")).WithTimeout(90*time.Second).WithPolling(time.Second).Should(BeTrue(), "the Policy's copy of seed")
		Consistently(func(g Gomega) {
			err := suite.client.Get(ctx, client.ObjectKey{Namespace: secLoopsTeam, Name: "seed-copy-copy"}, &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "charter's copy, written as %s, triggered the Policy again: %v", rightsPolicySA, err)
		}).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("a tenant writing as its namespace's charter-policy ServiceAccount still triggers the platform's ClusterPolicy", func(ctx SpecContext) {
		installPolicy(ctx, &kyvernov1.ClusterPolicy{}, secLoopsAudit)
		waitPolicyReady(ctx, "e2e-sec-loops-audit")
		By("the tenant requests a token of " + rightsPolicySA + " and writes as it")
		asPolicySA := serviceAccountClient(ctx, tenant, secLoopsTeam, rightsPolicySA)
		triggerUntilRequested(ctx, asPolicySA, secLoopsTeam, secLoopsCharterNS,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secLoopsTeam, Name: "audited"}}, exists(ctx, "record-audited"))
		var record corev1.ConfigMap
		Eventually(func() error {
			return suite.client.Get(ctx, client.ObjectKey{Namespace: secLoopsTeam, Name: "record-audited"}, &record)
		}).WithTimeout(90*time.Second).WithPolling(time.Second).Should(Succeed(), "the platform's record of the ServiceAccount's ConfigMap")
		Expect(record.Data).To(HaveKeyWithValue("by", "system:serviceaccount:"+secLoopsTeam+":"+rightsPolicySA))
	}, SpecTimeout(4*time.Minute))
})
