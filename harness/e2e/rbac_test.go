package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/internal/helmchart"
	webhookconfig "github.com/charter-dev/charter/webhook/config"
)

// Names of the RBAC specs. charter's namespace is the release namespace
// the spec installs charts/charter's RBAC into.
const (
	rbacCharterNamespace = "charter-rbac"
	rbacNamespace        = "e2e-rbac"
	rbacRepository       = "e2e-rbac-policies"
	// rbacGeneratedNamespace is created for the background controller
	// to generate rbacGeneratePolicy's NetworkPolicy into.
	rbacGeneratedNamespace = "e2e-rbac-generated"
	rbacGenerateName       = "rbac-generate-default-deny"
	// rbacCleanupRole lets the cleanup controller delete ConfigMaps, by
	// aggregation into charter-cleanup-aggregate, as config/rbac/README.md tells users
	// to grant what TTLs may delete.
	rbacCleanupRole = "e2e-rbac-cleanup-configmaps"
	// rbacExcludedNamespace is the chart's config.excludedNamespaces:
	// charter's webhooks never see it.
	rbacExcludedNamespace = "e2e-rbac-excluded"

	// Policies in testdata/rbac.
	rbacRequireName  = "rbac-require-name"        // Enforce, written by the admin
	rbacRequireOwner = "rbac-require-owner"       // Audit, background
	rbacRequireTeam  = "rbac-gitops-require-team" // Enforce, applied from Git
	// rbacDenyQuarantined is a ValidatingPolicy (Deny), applied from Git.
	rbacDenyQuarantined = "rbac-gitops-deny-quarantined"
)

// A tenant's PolicyRepository in rbacNamespace, applied as
// rbacTenantServiceAccount.
const (
	rbacTenantServiceAccount    = "policy-deployer"
	rbacTenantPolicyName        = "rbac-tenant-audit"
	rbacTenantClusterPolicyName = "rbac-tenant-escalates"
	rbacTenantPolicy            = `apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: ` + rbacTenantPolicyName + `, namespace: ` + rbacNamespace + `}
spec:
  background: false
  rules:
  - name: audit-name
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {failureAction: Audit, message: m, pattern: {metadata: {name: "?*"}}}
`
	rbacTenantClusterPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: ` + rbacTenantClusterPolicyName + `}
spec:
  background: false
  rules:
  - name: audit-name
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {failureAction: Audit, message: m, pattern: {metadata: {name: "?*"}}}
`
)

// rbacFieldOwner is the field manager the spec applies config/rbac as.
const rbacFieldOwner = "e2e-rbac"

// rbacGeneratePolicy makes the background controller write: a
// NetworkPolicy into each new Namespace labelled for it.
const rbacGeneratePolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: ` + rbacGenerateName + `}
spec:
  rules:
  - name: default-deny
    match: {any: [{resources: {kinds: [Namespace], selector: {matchLabels: {e2e-rbac-generate: "true"}}}}]}
    generate:
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: default-deny
      namespace: "{{ request.object.metadata.name }}"
      data:
        spec:
          podSelector: {}
          policyTypes: [Ingress]
`

// rbacExcludedProbePolicy refuses every Pod of rbacNamespace and
// rbacExcludedNamespace without the label probe.
const rbacExcludedProbePolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: rbac-excluded-probe}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: probe
    match: {any: [{resources: {kinds: [Pod], namespaces: [` + rbacNamespace + `, ` + rbacExcludedNamespace + `]}}]}
    validate: {message: "label probe is required", pattern: {metadata: {labels: {probe: "?*"}}}}
`

// rbacControllers are the controllers the RBAC specs run, each in its own
// `charter serve` process as its own ServiceAccount (charter-<name>), as
// the chart and config/manager deploy them.
var rbacControllers = []string{"admission", "reports", "gitsync", "background", "cleanup"}

// The RBAC specs install charts/charter's RBAC (rendered through Helm's Go
// packages: the ServiceAccounts, the roles `make manifests` generates from
// each controller's +kubebuilder:rbac markers and the aggregated roles
// config/rbac ships) and run `charter serve --controllers=<name>` for each
// of rbacControllers with a token of its ServiceAccount (TokenRequest), as
// in cluster, and nothing else: the API server's RBAC authorizer decides
// every request charter makes. Each controller's main path must work, and
// charter must log no forbidden request along the way: a verb the chart
// lacks fails here.
var _ = Describe("RBAC", Label("rbac"), Ordered, func() {
	var (
		cl          client.Client
		kubeconfigs = map[string]string{} // controller → a token of its ServiceAccount
		output      *lockedBuffer
		stops       []func(context.Context)
		prepo       *gitopsv1alpha1.PolicyRepository
		tenant      *gitopsv1alpha1.PolicyRepository
	)

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{rbacCharterNamespace, rbacNamespace, rbacExcludedNamespace} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, rbacNamespace)
		// The install shares the cluster-scoped RBAC names these specs
		// apply and delete.
		uninstallCharter(ctx, "the rbac specs apply charts/charter's RBAC for "+rbacCharterNamespace+" and run charter on this machine with its ServiceAccounts' tokens")
		skipIfCharterInstalled(ctx)

		By("installing charts/charter's RBAC into " + rbacCharterNamespace)
		applied, serveFlags := installChartRBAC(ctx)
		// Registered before charter starts, so it runs after charter stops.
		DeferCleanup(func(ctx SpecContext) {
			for _, u := range applied {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, u))).To(Succeed())
			}
		}, NodeTimeout(30*time.Second))

		output = &lockedBuffer{}
		for _, c := range rbacControllers {
			sa := "charter-" + c
			kubeconfigs[c] = serviceAccountKubeconfig(ctx, rbacCharterNamespace, sa)
			By("starting charter --controllers=" + c + " as system:serviceaccount:" + rbacCharterNamespace + ":" + sa)
			// The chart's flags for this controller (its Lease, exception
			// namespaces, webhook exclusions, ...), leader election on as
			// in cluster, so that its Lease is written under the same
			// RBAC too (a later flag wins over startCharterAs's).
			// The tenant's repository below is a folder of this machine
			// (file://), which only charter dev's flag allows outside
			// charter's namespace.
			flags := append(slices.Clone(serveFlags[c]), "--leader-elect=true", "--gitsync-cache-dir="+GinkgoT().TempDir(), "--gitsync-allow-file-urls")
			stops = append(stops, startCharterAs(ctx, rbacCharterNamespace, c, kubeconfigs[c],
				io.MultiWriter(GinkgoWriter, output), flags...))
		}
		waitPolicyWebhook(ctx)
	}, NodeTimeout(2*time.Minute))

	It("runs each controller as its own ServiceAccount, which may do only what its roles grant", func(ctx SpecContext) {
		for _, c := range rbacControllers {
			kube := clientsetFor(kubeconfigs[c])
			review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(review.Status.UserInfo.Username).To(Equal(serviceAccountUser(rbacCharterNamespace, "charter-"+c)))
			Expect(review.Status.UserInfo.Groups).NotTo(ContainElement("system:masters"))

			// No role grants Service writes: the authorizer must say no.
			_, err = kube.CoreV1().Services(rbacNamespace).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "not-charters-to-write"},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a Service as charter-%s: %v", c, err)
		}
		// Only the reports controller and admission read Pods, through
		// their aggregated roles; gitsync may not, nor read any Secret
		// but through get.
		kube := clientsetFor(kubeconfigs["gitsync"])
		_, err := kube.CoreV1().Pods(rbacNamespace).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing Pods as charter-gitsync: %v", err)
		_, err = kube.CoreV1().Secrets(rbacNamespace).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing Secrets as charter-gitsync: %v", err)
		kube = clientsetFor(kubeconfigs["reports"])
		_, err = kube.CoreV1().Pods(rbacNamespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred(), "listing Pods as charter-reports")
		_, err = kube.CoreV1().Secrets(rbacNamespace).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing Secrets as charter-reports: %v", err)
	}, SpecTimeout(30*time.Second))

	It("serves ClusterPolicies and writes their Ready status", func(ctx SpecContext) {
		for _, file := range []string{"require-name.yaml", "require-owner.yaml"} {
			Expect(cl.Create(ctx, rbacPolicy(file))).To(Succeed())
		}
		waitPolicyReady(ctx, rbacRequireName)
		waitPolicyReady(ctx, rbacRequireOwner)
	}, SpecTimeout(60*time.Second))

	It("refuses a bad Pod with the Enforce policy's message", func(ctx SpecContext) {
		Eventually(func() error {
			return refusedByCharterFor(ctx, rbacPod("probe", nil), rbacRequireName)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		err := cl.Create(ctx, rbacPod("bad", map[string]string{"owner": "alice"}))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`admission webhook "` + validateWebhookFail + `" denied the request: ` +
			"\n\nresource Pod/" + rbacNamespace + "/bad was blocked due to the following policies \n\n" + rbacRequireName + ":\n" +
			"  check-name: 'validation error: label ''app.kubernetes.io/name'' is required. rule check-name failed at path /metadata/labels/app.kubernetes.io/name/'"))

		// The refusal is told as an events.k8s.io Event on the policy (a
		// cluster-scoped object's go to default), which charter writes.
		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(cl.List(ctx, &evs, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(
				HaveField("Reason", "PolicyViolation"),
				HaveField("Regarding.Kind", "ClusterPolicy"),
				HaveField("Regarding.Name", rbacRequireName),
				HaveField("Note", ContainSubstring(rbacNamespace+"/bad")),
			)))
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(60*time.Second))

	It("reports an Audit failure in the Pod's PolicyReport", func(ctx SpecContext) {
		pod := rbacPod("no-owner", map[string]string{"app.kubernetes.io/name": "web", "team": "web"})
		Expect(cl.Create(ctx, pod)).To(Succeed())
		// Policies other specs leave behind may add results of their own.
		Eventually(func(g Gomega) {
			rep, err := reportOf(ctx, pod)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rep.Results).To(ContainElement(And(
				HaveField("Policy", rbacRequireOwner),
				HaveField("Rule", "check-owner"),
				HaveField("Result", policyreportv1alpha2.StatusFail),
				HaveField("Message", ContainSubstring("label 'owner' is required")),
			)))
		}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "report of Pod %s/%s", pod.Namespace, pod.Name)
	}, SpecTimeout(60*time.Second))

	It("syncs a PolicyRepository and enforces the policy it applies", func(ctx SpecContext) {
		revision := commitRBACRepository(filepath.Join(GinkgoT().TempDir(), "policies"))
		prepo = &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: rbacCharterNamespace, Name: rbacRepository},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{
				URL:      "file://" + revision.dir,
				Ref:      &gitopsv1alpha1.GitRef{Branch: "main"},
				Path:     "policies",
				Interval: &metav1.Duration{Duration: time.Hour},
			},
		}
		Expect(cl.Create(ctx, prepo)).To(Succeed())

		got := waitPolicyRepository(ctx, prepo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
			g.Expect(r.Status.LastAppliedRevision).To(Equal(revision.name))
			g.Expect(prepoCondition(r, gitopsv1alpha1.ConditionReady)).To(HaveField("Status", metav1.ConditionTrue))
		})
		Expect(got.Status.Inventory.Entries).To(ConsistOf(
			HaveField("ID", "_"+rbacRequireTeam+"_kyverno.io_ClusterPolicy"),
			HaveField("ID", "_"+rbacDenyQuarantined+"_policies.kyverno.io_ValidatingPolicy"),
		))

		p := waitPolicyReady(ctx, rbacRequireTeam)
		Expect(p.Labels).To(HaveKeyWithValue(appliedByNameLabel, rbacRepository))
		Eventually(func() error {
			return refusedByCharterFor(ctx, rbacPod("no-team", map[string]string{"app.kubernetes.io/name": "web"}), rbacRequireTeam)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("enforcing the ValidatingPolicy it applies (policies.kyverno.io, under gitsync's own role)")
		vp := &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: rbacDenyQuarantined}}
		waitReady(ctx, vp)
		Expect(vp.Labels).To(HaveKeyWithValue(appliedByNameLabel, rbacRepository))
		Eventually(func(g Gomega) {
			err := cl.Create(ctx, rbacPod("quarantined", map[string]string{"app.kubernetes.io/name": "web", "team": "web", "quarantined": "true"}), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("Pod quarantined is quarantined"))
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(60*time.Second))

	It("applies a tenant's PolicyRepository as the tenant's ServiceAccount, which RBAC confines", func(ctx SpecContext) {
		By("letting " + rbacTenantServiceAccount + " write Policies in " + rbacNamespace + ", and nothing else")
		Expect(cl.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: rbacTenantServiceAccount}})).To(Succeed())
		Expect(cl.Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: rbacTenantServiceAccount},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"kyverno.io"}, Resources: []string{"policies"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
		})).To(Succeed())
		Expect(cl.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: rbacTenantServiceAccount},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: rbacTenantServiceAccount},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: rbacNamespace, Name: rbacTenantServiceAccount}},
		})).To(Succeed())

		repo := newE2EGitRepo(filepath.Join(GinkgoT().TempDir(), "tenant"))
		rev := commitFiles(repo, map[string]string{"policy.yaml": rbacTenantPolicy})
		tenant = &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: rbacRepository},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{
				URL:                "file://" + rev.dir,
				Ref:                &gitopsv1alpha1.GitRef{Branch: "main"},
				Interval:           &metav1.Duration{Duration: time.Hour},
				RetryInterval:      &metav1.Duration{Duration: time.Second},
				ServiceAccountName: rbacTenantServiceAccount,
			},
		}
		Expect(cl.Create(ctx, tenant)).To(Succeed())
		waitPolicyRepository(ctx, tenant, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
			g.Expect(r.Status.LastAppliedRevision).To(Equal(rev.name))
			g.Expect(prepoCondition(r, gitopsv1alpha1.ConditionReady)).To(HaveField("Status", metav1.ConditionTrue))
		})
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: rbacNamespace, Name: rbacTenantPolicyName}, &kyvernov1.Policy{})).To(Succeed())

		By("refusing a ClusterPolicy the ServiceAccount may not write, with nothing applied")
		rev = commitFiles(repo, map[string]string{"cluster.yaml": rbacTenantClusterPolicy})
		Expect(cl.Get(ctx, client.ObjectKeyFromObject(tenant), tenant)).To(Succeed())
		tenant.Annotations = map[string]string{gitopsv1alpha1.ReconcileRequestAnnotation: time.Now().String()}
		Expect(cl.Update(ctx, tenant)).To(Succeed())
		got := waitPolicyRepository(ctx, tenant, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
			g.Expect(r.Status.LastAttemptedRevision).To(Equal(rev.name))
			g.Expect(prepoCondition(r, gitopsv1alpha1.ConditionStalled)).To(HaveField("Reason", gitopsv1alpha1.ReasonForbidden))
		})
		Expect(prepoCondition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring(
			`cluster.yaml: ClusterPolicy/` + rbacTenantClusterPolicyName + `: clusterpolicies.kyverno.io "` + rbacTenantClusterPolicyName + `" is forbidden: User "` +
				serviceAccountUser(rbacNamespace, rbacTenantServiceAccount) + `" cannot patch resource "clusterpolicies"`))
		err := cl.Get(ctx, client.ObjectKey{Name: rbacTenantClusterPolicyName}, &kyvernov1.ClusterPolicy{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the tenant's ClusterPolicy: %v", err)
	}, SpecTimeout(60*time.Second))

	It("never sees the namespaces the chart's config.excludedNamespaces names", func(ctx SpecContext) {
		var configs admissionregistrationv1.ValidatingWebhookConfigurationList
		Expect(cl.List(ctx, &configs, client.MatchingLabels{webhookconfig.ManagedByLabel: webhookconfig.ManagedByValue})).To(Succeed())
		Expect(configs.Items).NotTo(BeEmpty())
		// Every webhook that leaves kube-system out (those of namespaced
		// resources; the policy webhook has no namespaces to leave out)
		// leaves the excluded namespace out too.
		notIn := func(ns string) metav1.LabelSelectorRequirement {
			return metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{ns}}
		}
		selective := 0
		for _, c := range configs.Items {
			for _, w := range c.Webhooks {
				if w.NamespaceSelector == nil || !slices.ContainsFunc(w.NamespaceSelector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
					return equality.Semantic.DeepEqual(r, notIn(metav1.NamespaceSystem))
				}) {
					continue
				}
				selective++
				Expect(w.NamespaceSelector.MatchExpressions).To(ContainElement(notIn(rbacExcludedNamespace)), "webhook %s", w.Name)
			}
		}
		Expect(selective).NotTo(BeZero(), "no webhook of charter leaves kube-system out")
		// A policy that covers both namespaces refuses only in the one
		// the webhooks see.
		p := clusterPolicy(rbacExcludedProbePolicy)
		Expect(cl.Create(ctx, p)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
		waitPolicyReady(ctx, p.Name)
		Eventually(func() error {
			return refusedByCharterFor(ctx, rbacPod("seen", map[string]string{"app.kubernetes.io/name": "web"}), p.Name)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		unseen := rbacPod("unseen", nil)
		unseen.Namespace = rbacExcludedNamespace
		Expect(cl.Create(ctx, unseen, client.DryRunAll)).To(Succeed(), "a Pod in %s, which charter's webhooks must not see", rbacExcludedNamespace)
	}, SpecTimeout(60*time.Second))

	It("generates a NetworkPolicy into a new Namespace (admission's UpdateRequest, background's write)", func(ctx SpecContext) {
		p := clusterPolicy(rbacGeneratePolicy)
		Expect(cl.Create(ctx, p)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
		waitPolicyReady(ctx, rbacGenerateName)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rbacGeneratedNamespace, Labels: map[string]string{"e2e-rbac-generate": "true"}}}
		Expect(cl.Create(ctx, ns)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, ns))).To(Succeed()) })
		Eventually(func(g Gomega) {
			var np networkingv1.NetworkPolicy
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: rbacGeneratedNamespace, Name: "default-deny"}, &np)).To(Succeed())
			g.Expect(np.Labels).To(HaveKeyWithValue("generate.kyverno.io/policy-name", rbacGenerateName))
		}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "NetworkPolicy default-deny in %s", rbacGeneratedNamespace)
	}, SpecTimeout(60*time.Second))

	It("deletes a ConfigMap whose TTL expired (cleanup, with what its aggregated role is given)", func(ctx SpecContext) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "ttl", Labels: map[string]string{ttlLabel: "2s"}}}
		Expect(cl.Create(ctx, cm)).To(Succeed())
		Eventually(func() error { return cl.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}) }).
			WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Satisfy(apierrors.IsNotFound), "ConfigMap %s/ttl", rbacNamespace)
	}, SpecTimeout(60*time.Second))

	It("answers the CEL authorizer with SubjectAccessReviews, which admission's role may create", func(ctx SpecContext) {
		p := rbacPolicy("deleters-only.yaml")
		Expect(cl.Create(ctx, p)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
		waitPolicyReady(ctx, p.Name)
		labels := func(authz string) map[string]string {
			return map[string]string{"e2e-authz": authz, "app.kubernetes.io/name": "authz", "owner": "e2e", "team": "e2e"}
		}
		// charter evaluates the policy: a ServiceAccount without grants
		// may not delete Pods.
		Eventually(func() error {
			return refusedByCharterFor(ctx, rbacPod("nobody", labels("nobody")), p.Name)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		// Admitted only if every review was made and answered.
		Expect(cl.Create(ctx, rbacPod("authz", labels("true")), client.DryRunAll)).To(Succeed())
	}, SpecTimeout(60*time.Second))

	It("lets the uninstall hook's ServiceAccount delete charter's webhook configurations", func(ctx SpecContext) {
		var before admissionregistrationv1.ValidatingWebhookConfigurationList
		Expect(cl.List(ctx, &before, client.MatchingLabels{webhookconfig.ManagedByLabel: webhookconfig.ManagedByValue})).To(Succeed())
		Expect(before.Items).NotTo(BeEmpty(), "charter wrote no webhook configuration")
		out, err := exec.CommandContext(ctx, suite.charter, "serve", "--cleanup-webhooks",
			"--kubeconfig="+serviceAccountKubeconfig(ctx, rbacCharterNamespace, "charter-webhooks-cleanup"),
			"--namespace="+rbacCharterNamespace).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "charter serve --cleanup-webhooks as charter-webhooks-cleanup: %s", out)
		// The admission leader, still running, may write them again: each
		// one charter had must be gone, whatever replaced it.
		for _, w := range before.Items {
			var now admissionregistrationv1.ValidatingWebhookConfiguration
			err := cl.Get(ctx, client.ObjectKey{Name: w.Name}, &now)
			Expect(apierrors.IsNotFound(err) || (err == nil && now.UID != w.UID)).To(BeTrue(),
				"ValidatingWebhookConfiguration %s is still there: %v", w.Name, err)
		}
	}, SpecTimeout(60*time.Second))

	It("logs no forbidden request", func(ctx SpecContext) {
		// Stopped first, so that shutdown (the Lease's release) counts too.
		for _, stop := range stops {
			stop(ctx)
		}
		var forbidden []string
		for _, line := range strings.Split(output.String(), "\n") {
			// The tenant's refusals are the tenant's, not charter's.
			if forbiddenInLog.MatchString(line) && !strings.Contains(line, serviceAccountUser(rbacNamespace, rbacTenantServiceAccount)) {
				forbidden = append(forbidden, line)
			}
		}
		Expect(forbidden).To(BeEmpty(), "charter's requests the shipped RBAC refused:\n%s", strings.Join(forbidden, "\n"))
		Expect(output.String()).NotTo(BeEmpty(), "no output captured from charter")
	}, SpecTimeout(90*time.Second))

	AfterAll(func(ctx SpecContext) {
		// Deleting the PolicyRepository leaves its policy; no later spec
		// should meet any of these.
		for _, r := range []*gitopsv1alpha1.PolicyRepository{prepo, tenant} {
			if r != nil {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, r))).To(Succeed())
			}
		}
		tenantPolicy := &kyvernov1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: rbacTenantPolicyName}}
		Expect(client.IgnoreNotFound(cl.Delete(ctx, tenantPolicy))).To(Succeed())
		for _, name := range []string{rbacRequireName, rbacRequireOwner, rbacRequireTeam} {
			p := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
			Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed())
		}
	}, NodeTimeout(30*time.Second))
})

// forbiddenInLog matches a log line of a request the authorizer refused
// (`... is forbidden: User "system:serviceaccount:..." cannot list ...`).
var forbiddenInLog = regexp.MustCompile(`(?i)forbidden`)

// skipIfCharterInstalled skips the RBAC specs in a cluster where a charter
// the suite did not install is installed (the suite's own is uninstalled
// first, uninstallCharter): its ClusterRoles and
// ClusterRoleBindings have the names the specs apply and delete, so they
// would take its RBAC away from the running install, whose own Pods prove
// the chart's RBAC there.
func skipIfCharterInstalled(ctx context.Context) {
	GinkgoHelper()
	var b rbacv1.ClusterRoleBinding
	err := suite.client.Get(ctx, client.ObjectKey{Name: "charter-admission"}, &b)
	if apierrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	for _, s := range b.Subjects {
		if s.Namespace != rbacCharterNamespace {
			Skip("charter is installed in this cluster (ClusterRoleBinding charter-admission binds " + s.Namespace + "/" + s.Name +
				"): the RBAC specs would replace and delete its ClusterRoleBindings")
		}
	}
}

// installChartRBAC renders charts/charter for rbacCharterNamespace (with
// config.excludedNamespaces naming rbacExcludedNamespace) as `helm
// template` does and applies, server-side as the suite's admin,
// what makes charter's RBAC: every ServiceAccount, role and binding,
// the uninstall hook's included, and rbacCleanupRole. Everything else the
// chart installs (Deployments, Services, the PodDisruptionBudget, the
// hook's Job) goes as a server-side dry run, so the API server validates
// each object without charter's image running here. It returns what it
// applied, and per controller the `charter serve` flags its Deployment
// runs with (chartServeFlags).
func installChartRBAC(ctx context.Context) ([]*unstructured.Unstructured, map[string][]string) {
	GinkgoHelper()
	chart, err := helmchart.Render(filepath.Join(suite.root, "charts", "charter"), helmchart.Options{
		Namespace: rbacCharterNamespace,
		Values:    map[string]any{"config": map[string]any{"excludedNamespaces": []any{rbacExcludedNamespace}}},
	})
	Expect(err).NotTo(HaveOccurred())
	flags := map[string][]string{}
	cleanupRole := &unstructured.Unstructured{}
	cleanupRole.SetUnstructuredContent(map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": rbacCleanupRole, "labels": map[string]any{"rbac.charter.dev/aggregate-to-cleanup": "true"}},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch", "delete"}}},
	})
	rbacKinds := map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true, "ServiceAccount": true}
	var applied []*unstructured.Unstructured
	kinds := map[string]bool{}
	for _, u := range append(append(chart.Objects, chart.Hooks...), cleanupRole) {
		opts := []client.ApplyOption{client.FieldOwner(rbacFieldOwner), client.ForceOwnership}
		if !rbacKinds[u.GetKind()] {
			opts = append(opts, client.DryRunAll)
		}
		Expect(suite.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...)).To(Succeed(),
			"applying %s %s of charts/charter", u.GetKind(), u.GetName())
		kinds[u.GetKind()] = true
		if rbacKinds[u.GetKind()] {
			applied = append(applied, u)
		}
		if u.GetKind() == "Deployment" {
			c, f := chartServeFlags(u)
			flags[c] = f
		}
	}
	Expect(flags).To(HaveLen(len(rbacControllers)), "Deployments of charts/charter")
	aggregateClusterRoles(ctx)
	// What the chart must hold for the spec to mean anything.
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount", "Deployment", "Service", "PodDisruptionBudget", "Job"} {
		Expect(kinds).To(HaveKey(kind), "charts/charter renders no %s", kind)
	}
	return applied, flags
}

// chartServeFlags reads the `charter serve` flags of one of the chart's
// Deployments, the controller it runs, and returns them as
// startCharterAs takes them: without what only holds in cluster (the
// Service, the receiver's and cache's in-Pod paths), which startCharterAs
// and the caller replace, and with $(POD_NAMESPACE) expanded.
func chartServeFlags(d *unstructured.Unstructured) (controller string, flags []string) {
	GinkgoHelper()
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	Expect(err).NotTo(HaveOccurred())
	Expect(containers).To(HaveLen(1), "Deployment %s", d.GetName())
	args, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	Expect(err).NotTo(HaveOccurred())
	Expect(args).NotTo(BeEmpty())
	Expect(args[0]).To(Equal("serve"), "Deployment %s", d.GetName())
	for _, a := range args[1:] {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--controllers":
			controller = value
		case "--service", "--service-port", "--receiver-addr", "--gitsync-cache-dir":
		default:
			flags = append(flags, strings.ReplaceAll(a, "$(POD_NAMESPACE)", rbacCharterNamespace))
		}
	}
	Expect(controller).NotTo(BeEmpty(), "Deployment %s runs no --controllers", d.GetName())
	return controller, flags
}

// serviceAccountKubeconfig writes a copy of the suite's kubeconfig whose
// user is a token of the ServiceAccount namespace/name (TokenRequest, as
// the kubelet mounts one into charter's Pods), and returns its path.
func serviceAccountKubeconfig(ctx context.Context, namespace, name string) string {
	GinkgoHelper()
	token, err := suite.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "TokenRequest for ServiceAccount %s/%s", namespace, name)
	cfg, err := clientcmd.LoadFromFile(suite.provider.KubeconfigPath())
	Expect(err).NotTo(HaveOccurred())
	// The copy lives elsewhere: relative certificate paths must not break.
	Expect(clientcmd.ResolveLocalPaths(cfg)).To(Succeed())
	current, ok := cfg.Contexts[cfg.CurrentContext]
	Expect(ok).To(BeTrue(), "kubeconfig %s: no current context %q", suite.provider.KubeconfigPath(), cfg.CurrentContext)
	cfg.AuthInfos[current.AuthInfo] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// aggregateClusterRoles fills in the rules of aggregated ClusterRoles from
// the ClusterRoles their selectors match, as kube-controller-manager's
// clusterrole-aggregation controller does: the local control plane runs
// no controller manager. On kind that controller writes the same roles at
// the same time, so each role is read again and written only while it
// lacks an aggregated rule, retrying on conflict. Aggregated roles are
// members of others (edit of admin, view of edit), and a member's rules
// are its current ones, so the passes repeat as often as roles can nest.
func aggregateClusterRoles(ctx context.Context) {
	GinkgoHelper()
	var roles rbacv1.ClusterRoleList
	Expect(suite.client.List(ctx, &roles)).To(Succeed())
	for range 3 {
		aggregateClusterRolesOnce(ctx, roles.Items)
	}
}

// aggregateClusterRolesOnce fills in each aggregated role of roles once.
func aggregateClusterRolesOnce(ctx context.Context, roles []rbacv1.ClusterRole) {
	GinkgoHelper()
	for _, role := range roles {
		if role.AggregationRule == nil {
			continue
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var members rbacv1.ClusterRoleList
			if err := suite.client.List(ctx, &members); err != nil {
				return err
			}
			agg := &rbacv1.ClusterRole{}
			if err := suite.client.Get(ctx, client.ObjectKey{Name: role.Name}, agg); err != nil {
				return err
			}
			var rules []rbacv1.PolicyRule
			for _, sel := range agg.AggregationRule.ClusterRoleSelectors {
				s, err := metav1.LabelSelectorAsSelector(&sel)
				if err != nil {
					return err
				}
				for _, member := range members.Items {
					if member.Name != agg.Name && s.Matches(labels.Set(member.Labels)) {
						rules = append(rules, member.Rules...)
					}
				}
			}
			if hasEveryRule(agg.Rules, rules) {
				return nil
			}
			agg.Rules = rules
			return suite.client.Update(ctx, agg)
		})
		Expect(err).NotTo(HaveOccurred(), "aggregating ClusterRole %s", role.Name)
	}
}

// hasEveryRule says whether have holds each of want's rules.
func hasEveryRule(have, want []rbacv1.PolicyRule) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(h, w) }) {
			return false
		}
	}
	return true
}

// clientsetFor is a clientset of the kubeconfig file.
func clientsetFor(kubeconfig string) *kubernetes.Clientset {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	return kubernetes.NewForConfigOrDie(cfg)
}

// serviceAccountUser is the user name the API server gives a
// ServiceAccount's tokens.
func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// impersonatingKubeconfig writes a copy of the suite's kubeconfig whose
// user impersonates user with groups, and returns its path. The suite's
// admin may impersonate anyone: it is in system:masters on local, and
// bound to cluster-admin (kubeadm:cluster-admins) on kind.
func impersonatingKubeconfig(user string, groups ...string) string {
	GinkgoHelper()
	cfg, err := clientcmd.LoadFromFile(suite.provider.KubeconfigPath())
	Expect(err).NotTo(HaveOccurred())
	// The copy lives elsewhere: relative certificate paths must not break.
	Expect(clientcmd.ResolveLocalPaths(cfg)).To(Succeed())
	current, ok := cfg.Contexts[cfg.CurrentContext]
	Expect(ok).To(BeTrue(), "kubeconfig %s: no current context %q", suite.provider.KubeconfigPath(), cfg.CurrentContext)
	auth, ok := cfg.AuthInfos[current.AuthInfo]
	Expect(ok).To(BeTrue(), "kubeconfig %s: no user %q", suite.provider.KubeconfigPath(), current.AuthInfo)
	auth.Impersonate = user
	auth.ImpersonateGroups = groups
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// rbacRevision is the repository commitRBACRepository made and the
// revision charter reports for it.
type rbacRevision struct {
	dir, name string
}

// commitRBACRepository makes a Git repository in dir holding
// testdata/rbac/repository in one commit on main.
func commitRBACRepository(dir string) rbacRevision {
	GinkgoHelper()
	files := map[string]string{}
	for _, file := range []string{"policies/require-team.yaml", "policies/deny-quarantined.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "rbac", "repository", file))
		Expect(err).NotTo(HaveOccurred())
		files[file] = string(data)
	}
	return commitFiles(newE2EGitRepo(dir), files)
}

// commitFiles writes files (path → content) into repo's work tree and
// commits them on main.
func commitFiles(repo *e2eGitRepo, files map[string]string) rbacRevision {
	GinkgoHelper()
	wt, err := repo.repo.Worktree()
	Expect(err).NotTo(HaveOccurred())
	writeFiles(repo.dir, files)
	for file := range files {
		_, err = wt.Add(file)
		Expect(err).NotTo(HaveOccurred())
	}
	hash, err := wt.Commit("rbac policies", &git.CommitOptions{
		Author: &object.Signature{Name: "e2e", Email: "e2e@example.com", When: time.Now()},
	})
	Expect(err).NotTo(HaveOccurred())
	return rbacRevision{dir: repo.dir, name: "main@sha1:" + hash.String()}
}

// rbacPolicy reads a ClusterPolicy of testdata/rbac/policies.
func rbacPolicy(file string) *kyvernov1.ClusterPolicy {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join("testdata", "rbac", "policies", file))
	Expect(err).NotTo(HaveOccurred())
	return clusterPolicy(string(data))
}

// rbacPod is a Pod in the RBAC specs' namespace.
func rbacPod(name string, labels map[string]string) *corev1.Pod {
	p := newPod(name, labels)
	p.Namespace = rbacNamespace
	return p
}

// lockedBuffer collects charter's output while the spec reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
