package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The promotion specs (issue #27, "blast radius"): the platform enforces
// its staged policies in the tenant's namespace (charter.dev/enforcement
// =enforce); the tenant, admin of that namespace and allowed to label it
// (as platforms let namespace owners do), takes it back to Audit, which
// switches the staged policies' denials off there.
const (
	secPromotionCharterNS     = "e2e-sec-promotion-charter"
	secPromotionDenyCharterNS = "e2e-sec-promotion-deny-charter"
	secPromotionTenant        = "e2e-sec-promotion-tenant"
	secPromotionLabel         = "charter.dev/enforcement"
	secPromotionLabelOwn      = "e2e-sec-promotion-label-own-namespace"
	secPromotionPolicy        = "e2e-sec-promotion-staged"
)

// secPromotionStaged is the platform's staged policy: while one is
// installed, charter's promotion webhook sees the namespaces' label.
const secPromotionStaged = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: e2e-sec-promotion-staged
  labels: {charter.dev/staged: "true"}
spec:
  background: false
  rules:
  - name: require-app
    match: {any: [{resources: {kinds: [Pod], namespaces: [e2e-sec-promotion-*]}}]}
    validate: {message: app label required, pattern: {metadata: {labels: {app: "?*"}}}}
`

// secPromotionSetup makes the tenant admin of namespace, allowed to
// patch that Namespace; starts charter with flags and the staged policy;
// and has the platform enforce in namespace. It returns the tenant.
func secPromotionSetup(ctx context.Context, charterNS, namespace string, flags ...string) client.Client {
	GinkgoHelper()
	skipUnlessClusterReachesCharter()
	createNamespaces(ctx, charterNS, namespace)
	tenant := namespaceAdmin(ctx, secPromotionTenant, namespace)
	label := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: secPromotionLabelOwn + "-" + namespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{namespace}, Verbs: []string{"get", "patch", "update"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: label.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: label.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: secPromotionTenant}}}
	for _, obj := range []client.Object{label, binding} {
		Expect(client.IgnoreAlreadyExists(suite.client.Create(ctx, obj))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, obj))).To(Succeed()) })
	}
	startCharterWith(ctx, charterNS, "admission", flags...)
	p := clusterPolicy(secPromotionStaged)
	createEventually(ctx, suite.client, p)
	By("waiting for charter's promotion webhook")
	Eventually(func(g Gomega) {
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		g.Expect(suite.client.Get(ctx, client.ObjectKey{Name: resourceValidatingName}, &v)).To(Succeed())
		var names []string
		for _, w := range v.Webhooks {
			names = append(names, w.Name)
		}
		g.Expect(names).To(ContainElement("promotion.charter.svc"))
	}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	By("the platform enforces the staged policies in " + namespace)
	Eventually(func() error {
		return setEnforcement(ctx, suite.client, namespace, "enforce")
	}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
	return tenant
}

// setEnforcement sets (value "" removes) the namespace's
// charter.dev/enforcement label as cl.
func setEnforcement(ctx context.Context, cl client.Client, namespace, value string) error {
	patch := []byte(`{"metadata":{"labels":{"` + secPromotionLabel + `":null}}}`)
	if value != "" {
		patch = []byte(`{"metadata":{"labels":{"` + secPromotionLabel + `":"` + value + `"}}}`)
	}
	return cl.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, client.RawPatch(types.MergePatchType, patch))
}

// enforcementOf is the namespace's charter.dev/enforcement label.
func enforcementOf(ctx context.Context, namespace string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{}
	Expect(suite.client.Get(ctx, client.ObjectKey{Name: namespace}, ns)).To(Succeed())
	return ns.Labels[secPromotionLabel]
}

var _ = Describe("Security: promotion", Label("security"), func() {
	Context("by default", Ordered, func() {
		const namespace = "e2e-sec-promotion-team"
		var tenant client.Client
		BeforeAll(func(ctx SpecContext) {
			tenant = secPromotionSetup(ctx, secPromotionCharterNS, namespace)
		}, NodeTimeout(5*time.Minute))

		It("a namespace admin's move back to Audit leaves an Event naming the user", func(ctx SpecContext) {
			Expect(setEnforcement(ctx, tenant, namespace, "")).To(Succeed())
			Expect(enforcementOf(ctx, namespace)).To(BeEmpty())
			want := `user "` + secPromotionTenant + `" moved namespace "` + namespace + `" back to Audit: charter.dev/enforcement removed (was enforce); staged policies no longer enforce there`
			Eventually(func(g Gomega) {
				evs, err := suite.kube.EventsV1().Events("").List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				var notes []string
				for _, e := range evs.Items {
					if e.Regarding.Kind == "Namespace" && e.Regarding.Name == namespace && e.Reason == "EnforcementDowngraded" && e.Type == corev1.EventTypeWarning {
						notes = append(notes, e.Note)
					}
				}
				g.Expect(notes).To(ContainElement(want))
			}).WithTimeout(60*time.Second).WithPolling(time.Second).Should(Succeed(), "a Warning Event EnforcementDowngraded on Namespace %s", namespace)
		}, SpecTimeout(3*time.Minute))
	})

	Context("with --promotion-downgrade=deny", Ordered, func() {
		const namespace = "e2e-sec-promotion-deny-team"
		var tenant client.Client
		BeforeAll(func(ctx SpecContext) {
			tenant = secPromotionSetup(ctx, secPromotionDenyCharterNS, namespace, "--promotion-downgrade=deny")
		}, NodeTimeout(5*time.Minute))

		It("refuses a namespace admin's move back to Audit, naming the user and the flag", func(ctx SpecContext) {
			for value, change := range map[string]string{"": "removed (was enforce)", "audit": "changed from enforce to audit"} {
				err := setEnforcement(ctx, tenant, namespace, value)
				Expect(err).To(MatchError(ContainSubstring(`namespace "` + namespace + `": charter.dev/enforcement ` + change + ` denied to user "` + secPromotionTenant +
					`": charter serve --promotion-downgrade=deny keeps a namespace that enforces from going back to Audit`)))
				Expect(enforcementOf(ctx, namespace)).To(Equal("enforce"))
			}
		}, SpecTimeout(3*time.Minute))
	})
})
