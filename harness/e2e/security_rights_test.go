package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
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
	// rightsNeighbour is another tenant's namespace, holding a Secret the
	// attacker may not read.
	rightsNeighbour = "e2e-sec-rights-neighbour"
	// rightsLabeller may update Secrets in rightsNamespace, and nothing
	// else: not delete them.
	rightsLabeller = "e2e-sec-rights-labeller"
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
// rights. The platform also lets charter-cleanup read Secrets and
// ClusterRoleBindings (for its own DeletingPolicies): a tenant's
// NamespacedDeletingPolicy must not read them, nor call out, through its
// conditions; and a TTL label a tenant sets deletes only what
// charter-cleanup's role may delete (not Secrets). The attacks are independent: one refused does not skip the
// others (ContinueOnFailure).
var _ = Describe("Security: rights", Label("security"), Ordered, ContinueOnFailure, func() {
	var (
		cl     client.Client
		tenant client.Client
		// service stands for what only charter's network position
		// reaches (a metadata endpoint, an in-cluster service); the
		// cleanup controller may call it (--egress-allow), so only the
		// namespaced-policy rule keeps a tenant from it. calls counts
		// the requests it got.
		service *httptest.Server
		calls   sync.Map // path -> *atomic.Int32
	)
	called := func(path string) int32 {
		n, _ := calls.LoadOrStore(path, &atomic.Int32{})
		return n.(*atomic.Int32).Load()
	}

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{rbacCharterNamespace, rightsNamespace, rightsNeighbour} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, ns := range []string{rightsNamespace, rightsNeighbour} {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			}
		}, NodeTimeout(30*time.Second))
		service = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := calls.LoadOrStore(r.URL.Path, &atomic.Int32{})
			n.(*atomic.Int32).Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"token": "s3cr3t"}`))
		}))
		DeferCleanup(service.Close)
		uninstallCharter(ctx, "the rights specs apply charts/charter's RBAC for "+rbacCharterNamespace+" and run charter on this machine with its ServiceAccounts' tokens")
		skipIfCharterInstalled(ctx)

		By("installing charts/charter's RBAC, and the platform's grant of ResourceQuota and LimitRange deletes, and of Secret and ClusterRoleBinding reads, to charter-cleanup")
		// The reads are for the platform's own DeletingPolicies'
		// conditions (resource library): a namespaced policy must not
		// borrow them.
		platform := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: rightsPlatformCleanup, Labels: map[string]string{"rbac.charter.dev/aggregate-to-cleanup": "true"}},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"resourcequotas", "limitranges"}, Verbs: []string{"get", "list", "watch", "delete"}},
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings"}, Verbs: []string{"get", "list", "watch"}},
			},
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
		By("placing another tenant's Secret in " + rightsNeighbour)
		Expect(cl.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNeighbour, Name: "db"}, StringData: map[string]string{"password": "hunter2"}})).To(Succeed())
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
			flags := append(slices.Clone(serveFlags[c]), "--leader-elect=true", "--egress-allow="+strings.TrimPrefix(service.URL, "http://"))
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

	It("keeps a tenant's NamespacedDeletingPolicy from reading another namespace or cluster-scoped objects, and from calling out, in its conditions", func(ctx SpecContext) {
		// Each policy deletes the tenant's ConfigMap labelled peek=<its
		// name> when its condition holds: whether the ConfigMap is gone
		// would tell the tenant what charter read for it. Every condition
		// holds if charter reads or calls what it names.
		const own = `resource.Get("v1", "secrets", "` + rightsNamespace + `", "switch").data["on"] == "eWVz"`
		peeks := []struct{ name, condition, refusal string }{
			{"peek-neighbour", `resource.Get("v1", "secrets", "` + rightsNeighbour + `", "db").data["password"] == "aHVudGVyMg=="`, `reads only its own namespace "` + rightsNamespace + `"`},
			{"list-neighbour", `resource.List("v1", "secrets", "` + rightsNeighbour + `").items.size() > 0`, `reads only its own namespace "` + rightsNamespace + `"`},
			{"peek-cluster", `resource.Get("rbac.authorization.k8s.io/v1", "clusterrolebindings", "", "cluster-admin") != null`, `reads only its own namespace "` + rightsNamespace + `"`},
			{"list-cluster", `resource.List("rbac.authorization.k8s.io/v1", "clusterrolebindings", "` + rightsNamespace + `").items.size() > 0`, "is cluster-scoped"},
			{"call-out", `http.Get("` + service.URL + `/tenant").token == "s3cr3t"`, "is not allowed in namespaced policies"},
		}
		By("the tenant's own Secret, which its own policy may read")
		Expect(tenant.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: "switch"}, StringData: map[string]string{"on": "yes"}})).To(Succeed())
		var policies []*policiesv1.NamespacedDeletingPolicy
		for _, p := range append([]struct{ name, condition, refusal string }{{"peek-own", own, ""}}, peeks...) {
			Expect(tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: p.name, Labels: map[string]string{"peek": p.name}}})).To(Succeed())
			pol := &policiesv1.NamespacedDeletingPolicy{}
			Expect(yaml.UnmarshalStrict([]byte(fmt.Sprintf(rightsPeek, "NamespacedDeletingPolicy", "namespace: "+rightsNamespace+", ", p.name, p.condition)), pol)).To(Succeed())
			Expect(tenant.Create(ctx, pol)).To(Succeed(), "NamespacedDeletingPolicy %s", p.name)
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, pol))).To(Succeed()) })
			policies = append(policies, pol)
		}
		By("the platform's DeletingPolicy calling the same service, which charter may reach")
		Expect(cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: "platform-call", Labels: map[string]string{"peek": "platform-call"}}})).To(Succeed())
		platform := &policiesv1.DeletingPolicy{}
		Expect(yaml.UnmarshalStrict([]byte(fmt.Sprintf(rightsPeek, "DeletingPolicy", "", "platform-call", `http.Get("`+service.URL+`/platform").token == "s3cr3t"`)), platform)).To(Succeed())
		Expect(cl.Create(ctx, platform)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, platform))).To(Succeed()) })

		gone := func(g Gomega, name string) {
			err := cl.Get(ctx, client.ObjectKey{Namespace: rightsNamespace, Name: name}, &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ConfigMap %s: %v", name, err)
		}
		Eventually(func(g Gomega) {
			gone(g, "peek-own")
			gone(g, "platform-call")
		}).WithTimeout(150*time.Second).WithPolling(time.Second).Should(Succeed(),
			"the tenant's policy reading its own Secret, and the platform's calling the service, delete what they select (so the libraries work here)")
		Eventually(func(g Gomega) {
			for i, p := range peeks {
				pol := policies[i+1]
				g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
				c := meta.FindStatusCondition(pol.Status.ConditionStatus.Conditions, policiesv1.ConditionExecuted)
				g.Expect(c).NotTo(BeNil(), "%s: no %s condition yet", p.name, policiesv1.ConditionExecuted)
				g.Expect(c.Reason).To(Equal("RunFailed"), "%s: %s", p.name, c.Message)
				g.Expect(c.Message).To(ContainSubstring(p.refusal), p.name)
			}
		}).WithTimeout(150*time.Second).WithPolling(time.Second).Should(Succeed(), "each refused run names why")
		for _, p := range peeks {
			Expect(cl.Get(ctx, client.ObjectKey{Namespace: rightsNamespace, Name: p.name}, &corev1.ConfigMap{})).To(Succeed(),
				"ConfigMap %s deleted: charter read or called for the tenant what %s names", p.name, p.name)
		}
		Expect(called("/platform")).To(BeNumerically(">", 0), "the platform's call")
		Expect(called("/tenant")).To(BeZero(), "charter called the service for the tenant's policy")
	}, SpecTimeout(4*time.Minute))

	It("deletes no object a tenant labels with a TTL that charter's default cleanup role may not delete", func(ctx SpecContext) {
		// The labeller may update the platform's Secret but not delete
		// it. The cleanup controller deletes TTL-labelled objects with
		// its own rights, as Kyverno's does: only kinds its role may list,
		// watch and delete. Kyverno's default role, and charter's, delete
		// no kind; here the platform has granted ConfigMaps (and reads of
		// Secrets), nothing that deletes a Secret.
		By("letting " + rightsLabeller + " update, not delete, Secrets in " + rightsNamespace)
		for _, obj := range []client.Object{
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: rightsLabeller},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "update", "patch"}}}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: rightsLabeller},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: rightsLabeller},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: rightsLabeller}}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: "platform-db"}, StringData: map[string]string{"password": "correct horse"}},
		} {
			Expect(cl.Create(ctx, obj)).To(Succeed(), "%T %s", obj, obj.GetName())
		}
		labeller := clientAs(rest.ImpersonationConfig{UserName: rightsLabeller, Groups: []string{"system:authenticated"}})
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: "platform-db"}}
		Expect(apierrors.IsForbidden(labeller.Delete(ctx, secret, client.DryRunAll))).To(BeTrue(), "the labeller may delete the Secret itself")

		By("the labeller sets a TTL that expired at the Secret's creation")
		Expect(labeller.Patch(ctx, secret, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"cleanup.kyverno.io/ttl":"1s"}}}`)))).To(Succeed())

		By("a ConfigMap the platform labels the same way afterwards, which charter-cleanup may delete, goes")
		expiring := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rightsNamespace, Name: "ttl-expiring", Labels: map[string]string{"cleanup.kyverno.io/ttl": "1s"}}}
		Expect(cl.Create(ctx, expiring)).To(Succeed())
		Eventually(func() error {
			return cl.Get(ctx, client.ObjectKeyFromObject(expiring), &corev1.ConfigMap{})
		}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Satisfy(apierrors.IsNotFound), "the TTL controller deletes an expired ConfigMap")
		Consistently(func() error {
			return cl.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})
		}).WithTimeout(5*time.Second).WithPolling(time.Second).Should(Succeed(), "the labelled Secret was deleted: charter deleted what its default cleanup role may not")
	}, SpecTimeout(3*time.Minute))
})

// rightsPeek is a deleting policy of the rights specs (kind, the
// namespace field or nothing, name, condition) that deletes the
// ConfigMaps labelled peek=<name> in rightsNamespace whose condition
// holds, every ten seconds.
const rightsPeek = `apiVersion: policies.kyverno.io/v1
kind: %s
metadata: {%sname: %s}
spec:
  schedule: "*/10 * * * * *"
  matchConstraints:
    objectSelector: {matchLabels: {peek: %[3]s}}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ` + rightsNamespace + `}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [configmaps]}
  conditions:
  - name: peek
    expression: '%s'
`

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
