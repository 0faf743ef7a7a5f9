package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Names of the blast-radius specs: charter's namespace, the attacker's
// (it holds admin there and may write Kyverno Policies, nothing more) and
// another tenant's, which the attack must not reach.
const (
	blastCharterNamespace = "e2e-sec-blastradius-charter"
	blastTenantNamespace  = "e2e-sec-blastradius-tenant"
	blastVictimNamespace  = "e2e-sec-blastradius-victim"
	blastTenant           = "e2e-sec-blastradius-attacker"
	blastProbeMessage     = "blast-radius probe refused"
)

// blastEverything is the attacker's Policy: every kind ("*": naming
// another kind beside it is refused, as Kyverno refuses it), every
// operation, failing closed with the longest timeout. It denies only what it is told to (label probe=deny), so it
// costs the attacker nothing while charter is up; its weight is in the
// webhook it asks for.
const blastEverything = `apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: everything, namespace: ` + blastTenantNamespace + `}
spec:
  background: false
  webhookConfiguration: {failurePolicy: Fail, timeoutSeconds: 30}
  rules:
  - name: probe
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate:
      failureAction: Enforce
      message: ` + blastProbeMessage + `
      deny:
        conditions:
          any:
          - {key: "{{ request.object.metadata.labels.probe || '' }}", operator: Equals, value: deny}
`

// The attacker writes a Policy that matches every kind with failurePolicy
// Fail, then waits for charter to be down. Were the Policy's rules merged
// into charter's shared fail-closed webhook, which selects every
// namespace, the outage would refuse every write in every namespace, and
// every Namespace update: the tenant's policy would decide the whole
// cluster's availability. Its rules are registered with a
// namespaceSelector of its own namespace, so the outage closes only the
// namespace that asked for it.
//
// The outage is charter's webhook configuration as charter wrote it, with
// nothing answering at its address: the spec saves the configuration,
// stops charter (which removes it) and puts it back.
var _ = Describe("Security: blast radius", Label("security"), Ordered, func() {
	var (
		cl     client.Client
		tenant client.Client
		stop   func(context.Context)
	)

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{blastCharterNamespace, blastTenantNamespace, blastVictimNamespace} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, ns := range []string{blastTenantNamespace, blastVictimNamespace} {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			}
		}, NodeTimeout(30*time.Second))
		By("making " + blastTenant + " admin of " + blastTenantNamespace + ", and letting it write Policies there")
		tenant = namespaceAdmin(ctx, blastTenant, blastTenantNamespace, policyWriter(kyvernov1.GroupVersion.Group, "policies"))

		stop = startCharterWith(ctx, blastCharterNamespace, "admission")
	}, NodeTimeout(2*time.Minute))

	It("cannot make a charter outage block writes in another namespace with a Policy matching every kind that fails closed", func(ctx SpecContext) {
		By("writing, as the tenant, a Policy matching every kind and the Namespace kind, failing closed")
		var p kyvernov1.Policy
		Expect(yaml.UnmarshalStrict([]byte(blastEverything), &p)).To(Succeed())
		// The policy webhook may not answer yet: retry until it does.
		Eventually(func() error { return client.IgnoreAlreadyExists(tenant.Create(ctx, p.DeepCopy())) }).
			WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		probe := func(namespace, name, label string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"probe": label}}}
		}
		Eventually(func(g Gomega) {
			err := tenant.Create(ctx, probe(blastTenantNamespace, "probe", "deny"), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(blastProbeMessage))
		}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "the tenant's Policy is served")

		By("taking charter down with its webhook configuration left in place")
		var saved admissionregistrationv1.ValidatingWebhookConfiguration
		Expect(cl.Get(ctx, client.ObjectKey{Name: resourceValidatingName}, &saved)).To(Succeed())
		stop(ctx)
		outage := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels}, Webhooks: saved.Webhooks}
		Expect(cl.Create(ctx, outage)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(cl.Delete(ctx, outage))).To(Succeed())
		}, NodeTimeout(30*time.Second))

		By("the tenant's own namespace is closed: it asked for failurePolicy Fail")
		Eventually(func(g Gomega) {
			err := tenant.Create(ctx, probe(blastTenantNamespace, "during-outage", "allow"), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("failed calling webhook"))
		}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "the outage configuration is in force")

		By("another namespace still takes writes")
		written := probe(blastVictimNamespace, "during-outage", "allow")
		Expect(cl.Create(ctx, written)).To(Succeed(), "a ConfigMap in %s during charter's outage", blastVictimNamespace)
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, written))).To(Succeed()) })

		By("Namespaces, cluster-scoped, still take updates, the tenant's own included")
		for _, name := range []string{blastVictimNamespace, blastTenantNamespace} {
			var ns corev1.Namespace
			Expect(cl.Get(ctx, client.ObjectKey{Name: name}, &ns)).To(Succeed())
			ns.Labels["e2e-sec-blastradius"] = "updated-during-outage"
			Expect(cl.Update(ctx, &ns)).To(Succeed(), "updating Namespace %s during charter's outage", name)
		}
	}, SpecTimeout(4*time.Minute))
})
