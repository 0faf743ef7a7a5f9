package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/internal/imagetest"
)

// Names of the OCI specs.
const (
	ociCharterNamespace = "charter-oci"
	ociTenantNamespace  = "e2e-oci-team"
	ociRepository       = "e2e-oci-policies"
	ociKeySecret        = "e2e-oci-cosign"
	ociTenant           = "e2e-oci-tenant"
	ociDeployer         = "e2e-oci-deployer"
	ociKeyPassword      = "e2e-oci-password"
)

// The flow issue #30 promises a team already pushing with Flux: charter
// push (Flux's artifact format, signed with cosign) then a
// PolicyRepository of oci:// that verifies it, on the local control
// plane with a registry on loopback. The artifacts hold the GitOps
// specs' policies (testdata/gitops), which guard the Pods of their
// namespace.
var _ = Describe("OCI policy bundles", Label("oci"), Ordered, func() {
	var (
		cl      client.Client
		reg     *imagetest.Registry
		keyFile string
		prepo   *gitopsv1alpha1.PolicyRepository
		signed  string // the revision of the signed artifact
	)

	// push runs charter push of testdata/gitops/<step> to the tag, signed
	// with the spec's key when sign, and returns the revision a
	// PolicyRepository reports for it, "<tag>@sha256:<digest>".
	push := func(ctx context.Context, repository, tag, dir string, sign bool) string {
		GinkgoHelper()
		args := []string{"push", "oci://" + reg.Host + "/" + repository + ":" + tag, "--path", dir, "--insecure",
			"--source", "https://git.example.com/policies", "--revision", "main@sha1:e2e"}
		if sign {
			args = append(args, "--sign", "--key", keyFile)
		}
		cmd := exec.CommandContext(ctx, suite.charter, args...)
		cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+ociKeyPassword)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred(), "charter %s: %s", strings.Join(args, " "), stderr.String())
		printed := strings.TrimSpace(string(out))
		Expect(printed).To(MatchRegexp(`^oci://`+reg.Host+"/"+repository+":"+tag+`@sha256:[0-9a-f]{64}$`), "what charter push printed")
		return tag + printed[strings.LastIndex(printed, "@"):]
	}

	BeforeAll(func(ctx SpecContext) {
		// The registry listens on loopback, where charter runs.
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{ociCharterNamespace, gitopsNamespace, ociTenantNamespace} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, gitopsNamespace)
		reg = imagetest.NewRegistry(GinkgoT())

		// A key pair as cosign generate-key-pair writes it: the private
		// half encrypted, its password in COSIGN_PASSWORD.
		keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(ociKeyPassword), nil })
		Expect(err).NotTo(HaveOccurred())
		keyFile = filepath.Join(GinkgoT().TempDir(), "cosign.key")
		Expect(os.WriteFile(keyFile, keys.PrivateBytes, 0o600)).To(Succeed())
		Expect(cl.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ociCharterNamespace, Name: ociKeySecret},
			Data:       map[string][]byte{"cosign.pub": keys.PublicBytes},
		})).To(Succeed())

		// The egress guard blocks loopback; the registry's address is
		// let through as an operator would for an in-cluster registry.
		startCharterWith(ctx, ociCharterNamespace, "admission,gitsync",
			"--gitsync-cache-dir="+GinkgoT().TempDir(),
			"--egress-allow="+reg.Host)
	}, NodeTimeout(2*time.Minute))

	It("applies a signed artifact that charter push wrote, and enforces its policy", func(ctx SpecContext) {
		signed = push(ctx, "platform/policies", "v1", filepath.Join("testdata", "gitops", "01-initial"), true)
		prepo = &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ociCharterNamespace, Name: ociRepository},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{
				URL:      "oci://" + reg.Host + "/platform/policies",
				Ref:      &gitopsv1alpha1.GitRef{Tag: "v1"},
				Path:     "policies",
				Insecure: true,
				// An hour between polls: only a requested sync brings a
				// newer artifact in, so each step sees the one it pushed.
				Interval: &metav1.Duration{Duration: time.Hour},
				Verify: &gitopsv1alpha1.GitVerification{Provider: gitopsv1alpha1.ProviderCosign,
					SecretRef: corev1.LocalObjectReference{Name: ociKeySecret}},
			},
		}
		Expect(cl.Create(ctx, prepo)).To(Succeed())

		got := repositoryReadyAt(ctx, prepo, signed)
		Expect(prepoCondition(got, gitopsv1alpha1.ConditionSourceVerified)).To(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring("verified cosign signature of "+signed+" by key cosign.pub of secret "+ociKeySecret))))
		Expect(got.Status.Inventory.Entries).To(ConsistOf(HaveField("ID", "_"+gitopsRequireAppName+"_kyverno.io_ClusterPolicy")))
		waitPolicyReady(ctx, gitopsRequireAppName)
		Eventually(func() error {
			return refusedByCharterFor(ctx, gitopsPod("bad", nil), gitopsRequireAppName)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		Expect(cl.Create(ctx, gitopsPod("good", map[string]string{"app.kubernetes.io/name": "web"}), client.DryRunAll)).To(Succeed())
	}, SpecTimeout(90*time.Second))

	It("keeps the signed artifact applied when the tag is re-pushed unsigned, and says why", func(ctx SpecContext) {
		unsigned := push(ctx, "platform/policies", "v1", filepath.Join("testdata", "gitops", "03-fixed"), false)
		requestSync(ctx, prepo)

		msg := repositoryStalledWith(ctx, prepo, unsigned, gitopsv1alpha1.ReasonVerificationFailed)
		Expect(msg).To(ContainSubstring("no accepted cosign signature"))
		got := &gitopsv1alpha1.PolicyRepository{}
		Expect(cl.Get(ctx, client.ObjectKeyFromObject(prepo), got)).To(Succeed())
		Expect(got.Status.LastAppliedRevision).To(Equal(signed))

		// Nothing of the unsigned artifact is in the cluster; the signed
		// one still enforces.
		err := cl.Get(ctx, client.ObjectKey{Name: gitopsRequireTeam}, &kyvernov1.ClusterPolicy{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "policy of the unsigned artifact: %v", err)
		Expect(refusedByCharterFor(ctx, gitopsPod("still-bad", nil), gitopsRequireAppName)).To(Succeed())
	}, SpecTimeout(90*time.Second))

	It("applies the same content once it is signed", func(ctx SpecContext) {
		resigned := push(ctx, "platform/policies", "v1", filepath.Join("testdata", "gitops", "03-fixed"), true)
		requestSync(ctx, prepo)

		got := repositoryReadyAt(ctx, prepo, resigned)
		Expect(prepoCondition(got, gitopsv1alpha1.ConditionStalled)).To(BeNil())
		waitPolicyReady(ctx, gitopsRequireTeam)
		Eventually(func() error {
			return refusedByCharterFor(ctx, gitopsPod("no-team", map[string]string{"app.kubernetes.io/name": "web"}), gitopsRequireTeam)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(90*time.Second))

	It("applies a tenant's artifact with the tenant's rights, and nothing beyond them", func(ctx SpecContext) {
		// The tenant may write PolicyRepositories in its namespace and
		// admin there; its deployer ServiceAccount may write only
		// kyverno.io Policies.
		tenant := namespaceAdmin(ctx, ociTenant, ociTenantNamespace, policyWriter(gitopsv1alpha1.GroupVersion.Group, "policyrepositories"))
		grantServiceAccount(ctx, ociTenantNamespace, ociDeployer, policyWriter(kyvernov1.GroupVersion.Group, "policies"))

		dir := GinkgoT().TempDir()
		writeFiles(dir, map[string]string{
			"policy.yaml": ociTenantPolicy(ociTenantNamespace),
			"config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tenant-settings, namespace: " + ociTenantNamespace + "}\ndata: {a: b}\n",
		})
		beyond := push(ctx, "team/policies", "latest", dir, false)
		tpr := &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ociTenantNamespace, Name: "team"},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{
				URL:                "oci://" + reg.Host + "/team/policies",
				Ref:                &gitopsv1alpha1.GitRef{Tag: "latest"},
				Insecure:           true,
				Interval:           &metav1.Duration{Duration: time.Hour},
				ServiceAccountName: ociDeployer,
			},
		}
		Expect(tenant.Create(ctx, tpr)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, tpr))).To(Succeed()) })

		By("refusing the whole artifact: its ConfigMap is beyond the deployer's rights")
		msg := repositoryStalledWith(ctx, tpr, beyond, gitopsv1alpha1.ReasonForbidden)
		Expect(msg).To(ContainSubstring("config.yaml"))
		Expect(msg).To(ContainSubstring("tenant-settings"))
		for _, obj := range []client.Object{
			&kyvernov1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ociTenantNamespace, Name: "team-require-owner"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ociTenantNamespace, Name: "tenant-settings"}},
		} {
			err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s of a refused artifact: %v", obj, obj.GetName(), err)
		}

		By("refusing a Policy of another namespace, where the deployer has no rights")
		dir = GinkgoT().TempDir()
		writeFiles(dir, map[string]string{"policy.yaml": ociTenantPolicy(gitopsNamespace)})
		elsewhere := push(ctx, "team/policies", "latest", dir, false)
		requestSync(ctx, tpr)
		msg = repositoryStalledWith(ctx, tpr, elsewhere, gitopsv1alpha1.ReasonForbidden)
		Expect(msg).To(ContainSubstring(gitopsNamespace))
		err := cl.Get(ctx, client.ObjectKey{Namespace: gitopsNamespace, Name: "team-require-owner"}, &kyvernov1.Policy{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the tenant's Policy in another namespace: %v", err)

		By("applying what is within them")
		dir = GinkgoT().TempDir()
		writeFiles(dir, map[string]string{"policy.yaml": ociTenantPolicy(ociTenantNamespace)})
		within := push(ctx, "team/policies", "latest", dir, false)
		requestSync(ctx, tpr)
		got := repositoryReadyAt(ctx, tpr, within)
		Expect(got.Status.Inventory.Entries).To(ConsistOf(HaveField("ID", ociTenantNamespace+"_team-require-owner_kyverno.io_Policy")))
		p := &kyvernov1.Policy{}
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: ociTenantNamespace, Name: "team-require-owner"}, p)).To(Succeed())
		Expect(p.ManagedFields).To(ContainElement(HaveField("Manager", "charter/"+ociTenantNamespace+"/team")))
	}, SpecTimeout(2*time.Minute))

	AfterAll(func(ctx SpecContext) {
		if prepo != nil {
			Expect(client.IgnoreNotFound(cl.Delete(ctx, prepo))).To(Succeed())
		}
		for _, name := range []string{gitopsRequireAppName, gitopsRequireTeam} {
			Expect(client.IgnoreNotFound(cl.Delete(ctx, &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
		}
	}, NodeTimeout(30*time.Second))
})

// ociTenantPolicy is a tenant's Policy in namespace: an owner label on
// its ConfigMaps.
func ociTenantPolicy(namespace string) string {
	return `apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: team-require-owner, namespace: ` + namespace + `}
spec:
  validationFailureAction: Audit
  rules:
    - name: owner
      match: {any: [{resources: {kinds: [ConfigMap]}}]}
      validate:
        message: an owner label is required
        pattern: {metadata: {labels: {owner: "?*"}}}
`
}

// requestSync asks charter to sync the PolicyRepository now, as flux
// reconcile does: the reconcile-request annotation set to a new value.
func requestSync(ctx context.Context, pr *gitopsv1alpha1.PolicyRepository) {
	GinkgoHelper()
	got := &gitopsv1alpha1.PolicyRepository{}
	Expect(suite.client.Get(ctx, client.ObjectKeyFromObject(pr), got)).To(Succeed())
	patch := client.MergeFrom(got.DeepCopy())
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	got.Annotations[gitopsv1alpha1.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	Expect(suite.client.Patch(ctx, got, patch)).To(Succeed())
}

// writeFiles writes files (slash paths relative to dir) under dir.
func writeFiles(dir string, files map[string]string) {
	GinkgoHelper()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		Expect(os.MkdirAll(filepath.Dir(full), 0o755)).To(Succeed())
		Expect(os.WriteFile(full, []byte(body), 0o644)).To(Succeed())
	}
}
