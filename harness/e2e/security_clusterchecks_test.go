package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// Names of the cluster-checks security specs.
const (
	secAskCharterNamespace = "e2e-sec-ask-charter"
	secAskNamespace        = "e2e-sec-ask-team"
	// secAskOtherNamespace is another tenant's namespace.
	secAskOtherNamespace = "e2e-sec-ask-other"
	secAskAttacker       = "e2e-sec-ask-attacker"
	// secAskDeployer is the tenant's own ServiceAccount its repositories
	// write as: admin of its namespace, as the tenant itself.
	secAskDeployer = "deployer"
	// secAskEntry is a GlobalContextEntry no one wrote.
	secAskEntry = "e2e-sec-ask-nowhere"
)

// The GitOps pre-apply check asks the cluster what policy admission asks
// it (what charter's background, cleanup, reports controllers and policy
// admission may do; which GlobalContextEntries are Ready) with gitsync's
// own identity, for every repository. The attacker holds a tenant's
// repository (a PolicyRepository of its namespace, written as its own
// ServiceAccount) and tries to learn through those answers what policy
// admission would not tell that ServiceAccount.
var _ = Describe("Security: cluster checks", Label("security"), Ordered, func() {
	var (
		attacker client.Client
		// deployer is a client of the tenant's ServiceAccount, keeping the
		// warnings the API server relays.
		deployer *warningsClient
	)

	BeforeAll(func(ctx SpecContext) {
		// The repositories are folders on this machine, read over file://.
		skipUnlessClusterReachesCharter()
		cl := suite.client
		for _, ns := range []string{secAskCharterNamespace, secAskNamespace, secAskOtherNamespace} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		attacker = namespaceAdmin(ctx, secAskAttacker, secAskNamespace,
			policyWriter(gitopsv1alpha1.GroupVersion.Group, "policyrepositories"), policyWriter("kyverno.io", "policies"))
		By("the tenant making its own ServiceAccount, with what it holds itself")
		Expect(client.IgnoreAlreadyExists(attacker.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secAskNamespace, Name: secAskDeployer}}))).To(Succeed())
		for _, ref := range []rbacv1.RoleRef{
			{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			{APIGroup: rbacv1.GroupName, Kind: "Role", Name: secAskAttacker + "-policies"},
		} {
			Expect(client.IgnoreAlreadyExists(attacker.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: secAskNamespace, Name: secAskDeployer + "-" + strings.ToLower(ref.Kind)},
				RoleRef:    ref,
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: secAskNamespace, Name: secAskDeployer}},
			}))).To(Succeed())
		}
		deployer = newWarningsClient(rest.ImpersonationConfig{UserName: serviceAccountUser(secAskNamespace, secAskDeployer),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + secAskNamespace, "system:authenticated"}})
		// Policy admission and gitsync in one process: the background,
		// cleanup and reports controllers are other identities
		// (charter-background, charter-cleanup, charter-reports of
		// charter's namespace) that may do nothing here.
		startCharterWith(ctx, secAskCharterNamespace, "admission,gitsync",
			"--gitsync-cache-dir="+GinkgoT().TempDir(), "--gitsync-allow-file-urls")
	}, NodeTimeout(2*time.Minute))

	// sync commits files to a new repository of the tenant's, written as
	// its ServiceAccount, and returns the repository and the revision.
	sync := func(ctx SpecContext, name string, files map[string]string) (*gitopsv1alpha1.PolicyRepository, string) {
		GinkgoHelper()
		rev := commitFiles(newE2EGitRepo(filepath.Join(GinkgoT().TempDir(), name)), files)
		pr := &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: secAskNamespace, Name: name},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{
				URL:                "file://" + rev.dir,
				Ref:                &gitopsv1alpha1.GitRef{Branch: "main"},
				Interval:           &metav1.Duration{Duration: time.Hour},
				RetryInterval:      &metav1.Duration{Duration: 2 * time.Second},
				ServiceAccountName: secAskDeployer,
			},
		}
		Expect(attacker.Create(ctx, pr)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, pr))).To(Succeed()) })
		return pr, rev.name
	}

	It("learns nothing of charter's controllers through cluster-wide policies its ServiceAccount may not write", func(ctx SpecContext) {
		files := map[string]string{
			// Would the cleanup controller delete Secrets?
			"cleanup.yaml": `apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata: {name: e2e-sec-ask-secrets}
spec:
  schedule: "0 * * * *"
  match: {any: [{resources: {kinds: [Secret]}}]}
`,
			// May the background controller write Secrets in another
			// tenant's namespace?
			"copy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-sec-ask-copy}
spec:
  rules:
  - name: copy
    match: {any: [{resources: {kinds: [ConfigMap], namespaces: [` + secAskNamespace + `]}}]}
    generate:
      synchronize: true
      apiVersion: v1
      kind: Secret
      name: copied
      namespace: ` + secAskOtherNamespace + `
      data: {data: {a: Yg==}}
`,
			// Does the GlobalContextEntry exist?
			"entry.yaml": secAskEntryPolicy("ClusterPolicy", "e2e-sec-ask-entry", ""),
		}
		By("applying each as the ServiceAccount: RBAC refuses it before policy admission is asked")
		for file, doc := range files {
			_, err := deployer.dryRun(ctx, doc)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s as the ServiceAccount: %v", file, err)
			Expect(err.Error()).NotTo(ContainSubstring("admission webhook"), file)
		}

		By("syncing them from the tenant's repository: refused by the same RBAC, and told nothing more")
		pr, rev := sync(ctx, "cluster-wide", files)
		msg := repositoryStalledWith(ctx, pr, rev, gitopsv1alpha1.ReasonForbidden)
		Expect(msg).To(ContainSubstring(`User "` + serviceAccountUser(secAskNamespace, secAskDeployer) + `" cannot patch resource`))
		for _, told := range []string{"cleanup controller", "requires permissions", "Global context entry", secAskOtherNamespace} {
			Expect(msg).NotTo(ContainSubstring(told), "the repository's Ready message")
		}
		var events corev1.EventList
		Expect(suite.client.List(ctx, &events, client.InNamespace(secAskNamespace))).To(Succeed())
		for _, e := range events.Items {
			if e.InvolvedObject.Name == pr.Name {
				Expect(e.Message).NotTo(Or(ContainSubstring("cleanup controller"), ContainSubstring("requires permissions"), ContainSubstring("Global context entry")),
					"event %s of the repository", e.Reason)
			}
		}
	}, SpecTimeout(2*time.Minute))

	It("is told of a Policy its ServiceAccount may write what policy admission tells that ServiceAccount, and no more", func(ctx SpecContext) {
		doc := secAskEntryPolicy("Policy", "e2e-sec-ask-entry", secAskNamespace)
		By("applying the Policy as the ServiceAccount, with a dry run")
		var admitted []string
		Eventually(func(g Gomega) {
			warnings, err := deployer.dryRun(ctx, doc)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(warnings).To(ContainElement(ContainSubstring("Global context entry " + secAskEntry + " does not exist or is not ready")))
			admitted = warnings
		}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("syncing it from the tenant's repository")
		pr, rev := sync(ctx, "namespaced", map[string]string{"policy.yaml": doc})
		got := repositoryReadyAt(ctx, pr, rev)
		msg := prepoCondition(got, gitopsv1alpha1.ConditionReady).Message
		count := regexp.MustCompile(`; (\d+) policy warnings `).FindStringSubmatch(msg)
		Expect(count).NotTo(BeNil(), "Ready message %q quotes no policy warnings", msg)
		Expect(strconv.Atoi(count[1])).To(Equal(len(admitted)), "policy admission gave the ServiceAccount %q; the repository: %q", admitted, msg)
		for _, w := range admitted {
			Expect(msg).To(ContainSubstring(w))
		}
	}, SpecTimeout(2*time.Minute))
})

// secAskEntryPolicy is a ClusterPolicy or Policy (of namespace) whose
// rule reads secAskEntry.
func secAskEntryPolicy(kind, name, namespace string) string {
	meta := "{name: " + name + "}"
	if namespace != "" {
		meta = "{name: " + name + ", namespace: " + namespace + "}"
	}
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: %s
metadata: %s
spec:
  background: false
  rules:
  - name: read-entry
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    context:
    - name: entry
      globalReference: {name: %s, jmesPath: "@"}
    validate:
      failureAction: Audit
      message: the entry says no
      deny: {conditions: {any: [{key: "{{ entry }}", operator: Equals, value: "no"}]}}
`, kind, meta, secAskEntry)
}

// warningsClient is a client of the suite's API server acting as who,
// which keeps the warnings the API server relays.
type warningsClient struct {
	client.Client
	mu       sync.Mutex
	warnings []string
}

func newWarningsClient(who rest.ImpersonationConfig) *warningsClient {
	GinkgoHelper()
	w := &warningsClient{}
	cfg := rest.CopyConfig(suite.config)
	cfg.Impersonate = who
	cfg.WarningHandler = w
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w.Client = cl
	return w
}

func (w *warningsClient) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// dryRun creates the YAML document with a dry run and returns the
// warnings the API server relayed for it.
func (w *warningsClient) dryRun(ctx context.Context, doc string) ([]string, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.warnings = nil
	w.mu.Unlock()
	err := w.Create(ctx, u, client.DryRunAll)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.warnings, err
}
