package e2e

import (
	"context"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// Names of the rights specs. The tenant holds admin in its namespace and
// nothing else; the platform placed a ResourceQuota and a LimitRange
// there, which admin may read but not change.
const (
	rightsNamespace = "e2e-sec-rights-team"
	rightsTenant    = "e2e-sec-rights-tenant"
	// rightsPolicySA is the ServiceAccount charter impersonates for the
	// tenant's namespaced policies (serve
	// --namespaced-policy-service-account, the chart's default).
	rightsPolicySA = "charter-policy"
	rightsQuota    = "platform-quota"
	rightsLimits   = "platform-limits"
	// rightsPlatformCleanup is what the platform lets charter-cleanup
	// delete for its own ClusterCleanupPolicies: ResourceQuotas and
	// LimitRanges, by aggregation.
	rightsPlatformCleanup = "e2e-sec-rights-platform-cleanup"
)

// rightsEscalate is the tenant's Policy that tries to grant itself, through
// charter's background controller, ResourceQuota writes it lacks: a Role
// and a RoleBinding of it to the tenant.
const rightsEscalate = `apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: escalate, namespace: ` + rightsNamespace + `}
spec:
  rules:
  - name: quota-admin-role
    match: {any: [{resources: {kinds: [ConfigMap], names: [seed]}}]}
    generate:
      generateExisting: true
      apiVersion: rbac.authorization.k8s.io/v1
      kind: Role
      name: quota-admin
      namespace: ` + rightsNamespace + `
      data:
        rules:
        - apiGroups: [""]
          resources: [resourcequotas, limitranges]
          verbs: [get, list, update, patch, delete]
  - name: quota-admin-binding
    match: {any: [{resources: {kinds: [ConfigMap], names: [seed]}}]}
    generate:
      generateExisting: true
      apiVersion: rbac.authorization.k8s.io/v1
      kind: RoleBinding
      name: quota-admin
      namespace: ` + rightsNamespace + `
      data:
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: quota-admin}
        subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: ` + rightsTenant + `}]
`

// rightsRaiseQuota is the tenant's mutate-existing Policy that tries to
// raise the platform's ResourceQuota.
const rightsRaiseQuota = `apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: raise-quota, namespace: ` + rightsNamespace + `}
spec:
  rules:
  - name: raise
    match: {any: [{resources: {kinds: [ConfigMap], names: [seed]}}]}
    mutate:
      mutateExistingOnPolicyUpdate: true
      targets:
      - {apiVersion: v1, kind: ResourceQuota, name: ` + rightsQuota + `, namespace: ` + rightsNamespace + `}
      patchStrategicMerge:
        spec: {hard: {pods: "1000"}}
`

// rightsPurgeQuota and rightsPurgeLimits are the tenant's cleanup policies
// that try to delete what the platform placed in its namespace.
const rightsPurgeQuota = `apiVersion: kyverno.io/v2
kind: CleanupPolicy
metadata: {name: purge-quota, namespace: ` + rightsNamespace + `}
spec:
  schedule: "* * * * *"
  match: {any: [{resources: {kinds: [ResourceQuota]}}]}
`

const rightsPurgeLimits = `apiVersion: policies.kyverno.io/v1
kind: NamespacedDeletingPolicy
metadata: {name: purge-limits, namespace: ` + rightsNamespace + `}
spec:
  schedule: "* * * * *"
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [limitranges]}
`

// The rights specs install charts/charter's RBAC (as the RBAC specs do)
// and run the background and cleanup controllers as their own
// ServiceAccounts, the platform having let charter-cleanup delete
// ResourceQuotas and LimitRanges for its own ClusterCleanupPolicies. The
// attacker holds admin in rightsNamespace, gives its namespace's
// charter-policy ServiceAccount all it may (admin), and writes namespaced
// policies that would have charter write or delete what admin may not.
// Each must be refused by RBAC as the namespace's ServiceAccount, nothing
// changed, and the policy's status must say why. Before namespaced
// policies acted as their ServiceAccount, charter did each with its own
// rights. The attacks are independent: one refused does not skip the
// others (ContinueOnFailure).
var _ = Describe("Security: rights", Label("security"), Ordered, ContinueOnFailure, func() {
	var (
		cl     client.Client
		tenant client.Client
	)

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{rbacCharterNamespace, rightsNamespace} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rightsNamespace}}))).To(Succeed())
		}, NodeTimeout(30*time.Second))
		uninstallCharter(ctx, "the rights specs apply charts/charter's RBAC for "+rbacCharterNamespace+" and run charter on this machine with its ServiceAccounts' tokens")
		skipIfCharterInstalled(ctx)

		By("installing charts/charter's RBAC, and the platform's grant of ResourceQuota and LimitRange deletes to charter-cleanup")
		platform := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: rightsPlatformCleanup, Labels: map[string]string{"rbac.charter.dev/aggregate-to-cleanup": "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"resourcequotas", "limitranges"}, Verbs: []string{"get", "list", "watch", "delete"}}},
		}
		Expect(client.IgnoreAlreadyExists(cl.Create(ctx, platform))).To(Succeed())
		applied, serveFlags := installChartRBAC(ctx)
		DeferCleanup(func(ctx SpecContext) {
			for _, u := range applied {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, u))).To(Succeed())
			}
			Expect(client.IgnoreNotFound(cl.Delete(ctx, platform))).To(Succeed())
		}, NodeTimeout(30*time.Second))
		// admin, charter-cleanup and charter-background are aggregated
		// ClusterRoles: fill them in, as a controller manager would.
		aggregateClusterRoles(ctx)

		By("making " + rightsTenant + " admin of " + rightsNamespace + ", and letting it write Kyverno policies there")
		tenant = namespaceAdmin(ctx, rightsTenant, rightsNamespace,
			policyWriter(kyvernov1.GroupVersion.Group, "policies", "cleanuppolicies"), policyWriter(policiesv1.GroupVersion.Group, "namespaceddeletingpolicies"))
		By("placing the platform's ResourceQuota and LimitRange in " + rightsNamespace)
		Expect(cl.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: rightsQuota},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}})).To(Succeed())
		Expect(cl.Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: rightsLimits},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}})).To(Succeed())

		By("the tenant gives its namespace's " + rightsPolicySA + " all it may: admin")
		grantPolicyServiceAccountAdmin(ctx, tenant, rightsNamespace)
		Expect(tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: "seed"}})).To(Succeed())
		// What the attack is about: admin may not change them.
		Expect(apierrors.IsForbidden(tenant.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: rightsQuota}}, client.DryRunAll))).
			To(BeTrue(), "the tenant may delete the platform's ResourceQuota itself")

		for _, c := range []string{"background", "cleanup"} {
			sa := "charter-" + c
			By("starting charter --controllers=" + c + " as system:serviceaccount:" + rbacCharterNamespace + ":" + sa)
			flags := append(slices.Clone(serveFlags[c]), "--leader-elect=true")
			startCharterAs(ctx, rbacCharterNamespace, c, serviceAccountKubeconfig(ctx, rbacCharterNamespace, sa), GinkgoWriter, flags...)
		}
	}, NodeTimeout(2*time.Minute))

	It("refuses a tenant's Policy that generates a Role and RoleBinding granting what the tenant lacks", func(ctx SpecContext) {
		p := rightsPolicy(rightsEscalate)
		Expect(tenant.Create(ctx, p)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
		Eventually(func(g Gomega) {
			c := rightsBackgroundCondition(ctx, g, p)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("rule quota-admin-role: ServiceAccount " + rightsNamespace + "/" + rightsPolicySA))
			g.Expect(c.Message).To(ContainSubstring("may not create Role"))
		}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "the Policy's Background condition names the ServiceAccount and the refused create")
		Consistently(func(g Gomega) {
			for _, obj := range []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}} {
				err := cl.Get(ctx, client.ObjectKey{Namespace: rightsNamespace, Name: "quota-admin"}, obj)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T quota-admin: %v", obj, err)
			}
		}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(apierrors.IsForbidden(tenant.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: rightsQuota}}, client.DryRunAll))).
			To(BeTrue(), "the tenant may now delete the platform's ResourceQuota")
	}, SpecTimeout(2*time.Minute))

	It("refuses a tenant's mutate-existing Policy patching what the tenant may not update", func(ctx SpecContext) {
		p := rightsPolicy(rightsRaiseQuota)
		Expect(tenant.Create(ctx, p)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
		Eventually(func(g Gomega) {
			c := rightsBackgroundCondition(ctx, g, p)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("rule raise: ServiceAccount " + rightsNamespace + "/" + rightsPolicySA))
			g.Expect(c.Message).To(ContainSubstring("may not update ResourceQuota"))
		}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "the Policy's Background condition names the ServiceAccount and the refused update")
		var q corev1.ResourceQuota
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: rightsNamespace, Name: rightsQuota}, &q)).To(Succeed())
		pods := q.Spec.Hard[corev1.ResourcePods]
		Expect(pods.String()).To(Equal("10"), "the platform's ResourceQuota was raised")
	}, SpecTimeout(2*time.Minute))

	It("refuses a tenant's CleanupPolicy and NamespacedDeletingPolicy deleting what the tenant may not delete", func(ctx SpecContext) {
		quota := &kyvernov2.CleanupPolicy{}
		Expect(yaml.UnmarshalStrict([]byte(rightsPurgeQuota), quota)).To(Succeed())
		limits := &policiesv1.NamespacedDeletingPolicy{}
		Expect(yaml.UnmarshalStrict([]byte(rightsPurgeLimits), limits)).To(Succeed())
		for _, p := range []client.Object{quota, limits} {
			Expect(tenant.Create(ctx, p)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
		}
		// Each runs at the next minute. The CleanupPolicy says so in its
		// Ready condition, the NamespacedDeletingPolicy in Kyverno's
		// conditionStatus, as Executed (and RBACPermissionsGranted).
		ready := func(g Gomega, obj client.Object, conds func() []metav1.Condition, condition, target string) {
			g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			c := meta.FindStatusCondition(conds(), condition)
			g.Expect(c).NotTo(BeNil(), "%s: no %s condition yet", obj.GetName(), condition)
			g.Expect(c.Reason).To(Equal("RunFailed"), "%s: %s", obj.GetName(), c.Message)
			g.Expect(c.Message).To(ContainSubstring("deleting " + target))
			g.Expect(c.Message).To(ContainSubstring("as ServiceAccount " + rightsNamespace + "/" + rightsPolicySA))
			g.Expect(c.Message).To(ContainSubstring("forbidden"))
		}
		Eventually(func(g Gomega) {
			ready(g, quota, func() []metav1.Condition { return quota.Status.Conditions }, "Ready", "ResourceQuota/"+rightsNamespace+"/"+rightsQuota)
			ready(g, limits, func() []metav1.Condition { return limits.Status.ConditionStatus.Conditions }, policiesv1.ConditionExecuted, "LimitRange/"+rightsNamespace+"/"+rightsLimits)
			g.Expect(limits.Status.ConditionStatus.IsReady()).To(BeFalse())
		}).WithTimeout(150*time.Second).WithPolling(time.Second).Should(Succeed(), "both runs fail naming the ServiceAccount and the refused delete")
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: rightsNamespace, Name: rightsQuota}, &corev1.ResourceQuota{})).To(Succeed(), "the platform's ResourceQuota")
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: rightsNamespace, Name: rightsLimits}, &corev1.LimitRange{})).To(Succeed(), "the platform's LimitRange")
	}, SpecTimeout(3*time.Minute))
})

// rightsPolicy decodes a Policy of the rights specs.
func rightsPolicy(manifest string) *kyvernov1.Policy {
	GinkgoHelper()
	var p kyvernov1.Policy
	Expect(yaml.UnmarshalStrict([]byte(manifest), &p)).To(Succeed())
	return &p
}

// rightsBackgroundCondition reads a Policy's Background condition, which
// charter's background controller writes when a write of its rules is
// refused.
func rightsBackgroundCondition(ctx context.Context, g Gomega, p *kyvernov1.Policy) *metav1.Condition {
	var cur kyvernov1.Policy
	g.Expect(suite.client.Get(ctx, client.ObjectKeyFromObject(p), &cur)).To(Succeed())
	c := meta.FindStatusCondition(cur.Status.Conditions, "Background")
	g.Expect(c).NotTo(BeNil(), "Policy %s: no Background condition: %+v", p.Name, cur.Status.Conditions)
	return c
}

// grantPolicyServiceAccount creates, in namespace, the ServiceAccount
// charter impersonates for the namespaced policies there and a Role of
// rules bound to it, as docs/tenancy.md tells a namespace's owner to.
func grantPolicyServiceAccount(ctx context.Context, namespace string, rules ...rbacv1.PolicyRule) {
	GinkgoHelper()
	grantServiceAccount(ctx, namespace, rightsPolicySA, rules...)
}
