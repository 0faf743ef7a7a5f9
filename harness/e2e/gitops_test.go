package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// Names of the GitOps specs. charter runs with its own namespace, so these
// specs and the admission ones do not share state whatever their order.
const (
	gitopsCharterNamespace = "charter-gitops"
	gitopsNamespace        = "e2e-gitops"
	gitopsRepository       = "e2e-policies"
	gitopsReceiverSecret   = "e2e-policies-webhook"
	gitopsRequireAppName   = "gitops-require-app-name"
	gitopsRequireTeam      = "gitops-require-team"
)

// The labels gitsync puts on what it applies (reconciler/gitsync/apply).
const (
	appliedByNameLabel      = "gitops.charter.dev/name"
	appliedByNamespaceLabel = "gitops.charter.dev/namespace"
)

var _ = Describe("GitOps", Label("gitops"), Ordered, func() {
	var (
		cl       client.Client
		repo     *e2eGitRepo
		receiver string
		token    = []byte("e2e-receiver-token")
		prepo    *gitopsv1alpha1.PolicyRepository
		// revisions by step, as the PolicyRepository reports them.
		initial, broken string
	)

	BeforeAll(func(ctx SpecContext) {
		// The repository is a folder on this machine, read over file://,
		// and the receiver listens on loopback: both are charter's to
		// reach, and charter runs here whatever the cluster.
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{gitopsCharterNamespace, gitopsNamespace} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, gitopsNamespace)
		repo = newE2EGitRepo(filepath.Join(GinkgoT().TempDir(), "policies"))
		initial = repo.commitStep("01-initial")

		receiverPort := freePort()
		receiver = "http://127.0.0.1:" + strconv.Itoa(receiverPort)
		startCharterWith(ctx, gitopsCharterNamespace, "admission,gitsync",
			"--receiver-addr=127.0.0.1:"+strconv.Itoa(receiverPort),
			"--gitsync-cache-dir="+GinkgoT().TempDir())

		Expect(cl.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: gitopsCharterNamespace, Name: gitopsReceiverSecret},
			Data:       map[string][]byte{gitopsv1alpha1.ReceiverTokenKey: token},
		})).To(Succeed())
		prepo = &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: gitopsCharterNamespace, Name: gitopsRepository},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{
				URL:  "file://" + repo.dir,
				Ref:  &gitopsv1alpha1.GitRef{Branch: "main"},
				Path: "policies",
				// An hour between polls: after the first sync, only the
				// receiver brings a commit in.
				Interval: &metav1.Duration{Duration: time.Hour},
				Receiver: &gitopsv1alpha1.Receiver{SecretRef: corev1.LocalObjectReference{Name: gitopsReceiverSecret}},
			},
		}
		Expect(cl.Create(ctx, prepo)).To(Succeed())
	}, NodeTimeout(2*time.Minute))

	It("applies a commit and enforces its policy", func(ctx SpecContext) {
		got := waitPolicyRepository(ctx, prepo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
			g.Expect(r.Status.LastAppliedRevision).To(Equal(initial))
			g.Expect(prepoCondition(r, gitopsv1alpha1.ConditionReady)).To(HaveField("Status", metav1.ConditionTrue))
		})
		Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		Expect(got.Status.Inventory.Entries).To(ConsistOf(HaveField("ID", "_"+gitopsRequireAppName+"_kyverno.io_ClusterPolicy")))

		p := waitPolicyReady(ctx, gitopsRequireAppName)
		Expect(p.Labels).To(HaveKeyWithValue(appliedByNameLabel, gitopsRepository))
		Expect(p.Labels).To(HaveKeyWithValue(appliedByNamespaceLabel, gitopsCharterNamespace))
		// Each repository applies under a field manager of its own.
		Expect(p.ManagedFields).To(ContainElement(HaveField("Manager", "charter/"+gitopsCharterNamespace+"/"+gitopsRepository)))

		// The webhook serves the policy once the policy cache has it.
		Eventually(func() error {
			return refusedByCharterFor(ctx, gitopsPod("bad", nil), gitopsRequireAppName)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		Expect(cl.Create(ctx, gitopsPod("good", map[string]string{"app.kubernetes.io/name": "web"}), client.DryRunAll)).To(Succeed())
	}, SpecTimeout(60*time.Second))

	It("leaves the previous revision applied when a commit is broken, and says where", func(ctx SpecContext) {
		broken = repo.commitStep("02-broken")
		push(ctx, receiver, prepo, token)

		got := waitPolicyRepository(ctx, prepo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
			g.Expect(r.Status.LastAttemptedRevision).To(Equal(broken))
			g.Expect(prepoCondition(r, gitopsv1alpha1.ConditionStalled)).To(HaveField("Status", metav1.ConditionTrue))
		})
		Expect(got.Status.LastAppliedRevision).To(Equal(initial))
		Expect(got.Status.LastHandledReconcileAt).To(Equal(got.Annotations[gitopsv1alpha1.ReconcileRequestAnnotation]))
		ready := prepoCondition(got, gitopsv1alpha1.ConditionReady)
		Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonValidationFailed))
		for _, where := range []string{
			"policies/require-team.yaml",
			`ClusterPolicy "` + gitopsRequireTeam + `"`,
			`spec.rules[0].validate.pattern.metadata.labels: unknown anchor "~(team)"`,
		} {
			Expect(ready.Message).To(ContainSubstring(where))
			Expect(prepoCondition(got, gitopsv1alpha1.ConditionStalled).Message).To(ContainSubstring(where))
		}

		// Nothing of the broken revision is in the cluster; the previous
		// one still enforces.
		err := cl.Get(ctx, client.ObjectKey{Name: gitopsRequireTeam}, &kyvernov1.ClusterPolicy{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "policy of the broken revision: %v", err)
		Expect(refusedByCharterFor(ctx, gitopsPod("still-bad", nil), gitopsRequireAppName)).To(Succeed())
		Expect(cl.Create(ctx, gitopsPod("no-team", map[string]string{"app.kubernetes.io/name": "web"}), client.DryRunAll)).To(Succeed())
	}, SpecTimeout(60*time.Second))

	It("recovers with the fix", func(ctx SpecContext) {
		fixed := repo.commitStep("03-fixed")
		push(ctx, receiver, prepo, token)

		got := waitPolicyRepository(ctx, prepo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
			g.Expect(r.Status.LastAppliedRevision).To(Equal(fixed))
			g.Expect(prepoCondition(r, gitopsv1alpha1.ConditionReady)).To(HaveField("Status", metav1.ConditionTrue))
		})
		Expect(prepoCondition(got, gitopsv1alpha1.ConditionStalled)).To(BeNil())
		Expect(got.Status.Inventory.Entries).To(HaveLen(2))
		waitPolicyReady(ctx, gitopsRequireTeam)

		Eventually(func() error {
			return refusedByCharterFor(ctx, gitopsPod("no-team", map[string]string{"app.kubernetes.io/name": "web"}), gitopsRequireTeam)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		Expect(cl.Create(ctx, gitopsPod("good", map[string]string{"app.kubernetes.io/name": "web", "team": "a"}), client.DryRunAll)).To(Succeed())
	}, SpecTimeout(60*time.Second))

	AfterAll(func(ctx SpecContext) {
		// Deleting the PolicyRepository leaves its policies; remove them so
		// that no later spec meets them.
		if prepo != nil {
			Expect(client.IgnoreNotFound(cl.Delete(ctx, prepo))).To(Succeed())
		}
		for _, name := range []string{gitopsRequireAppName, gitopsRequireTeam} {
			p := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
			Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed())
		}
	}, NodeTimeout(30*time.Second))
})

// refusedByCharterFor is refusedByCharter for a refusal that names policy.
func refusedByCharterFor(ctx context.Context, obj client.Object, policy string) error {
	err := suite.client.Create(ctx, obj, client.DryRunAll)
	if err == nil {
		return fmt.Errorf("%s/%s admitted", obj.GetNamespace(), obj.GetName())
	}
	if !strings.Contains(err.Error(), `admission webhook "`+validateWebhookFail+`" denied the request`) ||
		!strings.Contains(err.Error(), policy+":") {
		return err
	}
	return nil
}

// waitPolicyReady returns the ClusterPolicy once charter's admission
// controller reports it served: Ready at its current generation.
func waitPolicyReady(ctx context.Context, name string) *kyvernov1.ClusterPolicy {
	GinkgoHelper()
	p := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	waitReady(ctx, p)
	return p
}

// waitReady waits until charter reports the policy p names served, of
// whatever kind p is (ClusterPolicy, ValidatingPolicy, ...): Ready at its
// current generation. p holds the policy as last read.
func waitReady(ctx context.Context, p kyvernov1.PolicyInterface) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(suite.client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		// Ready condition (ClusterPolicy, Policy) or
		// status.conditionStatus (the policies.kyverno.io kinds).
		g.Expect(policiesv1.ReadyAt(p)).To(BeTrue(), "%s %s status at generation %d", p.GetKind(), p.GetName(), p.GetGeneration())
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "%s %s Ready", p.GetKind(), p.GetName())
}

// gitopsPod is a Pod in the GitOps specs' namespace.
func gitopsPod(name string, labels map[string]string) *corev1.Pod {
	p := newPod(name, labels)
	p.Namespace = gitopsNamespace
	return p
}

// waitPolicyRepository returns the PolicyRepository once cond holds.
func waitPolicyRepository(ctx context.Context, pr *gitopsv1alpha1.PolicyRepository, cond func(Gomega, *gitopsv1alpha1.PolicyRepository)) *gitopsv1alpha1.PolicyRepository {
	GinkgoHelper()
	got := &gitopsv1alpha1.PolicyRepository{}
	Eventually(func(g Gomega) {
		g.Expect(suite.client.Get(ctx, client.ObjectKeyFromObject(pr), got)).To(Succeed())
		cond(g, got)
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "PolicyRepository %s/%s", pr.Namespace, pr.Name)
	return got
}

// repositoryStalledWith waits until the PolicyRepository is Stalled for
// reason (at revision, unless empty) and returns its Ready message.
func repositoryStalledWith(ctx context.Context, pr *gitopsv1alpha1.PolicyRepository, revision, reason string) string {
	GinkgoHelper()
	got := waitPolicyRepository(ctx, pr, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		if revision != "" {
			g.Expect(r.Status.LastAttemptedRevision).To(Equal(revision))
		}
		g.Expect(prepoCondition(r, gitopsv1alpha1.ConditionStalled)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", reason)))
	})
	return prepoCondition(got, gitopsv1alpha1.ConditionReady).Message
}

// repositoryReadyAt waits until the PolicyRepository has applied revision
// and is Ready.
func repositoryReadyAt(ctx context.Context, pr *gitopsv1alpha1.PolicyRepository, revision string) *gitopsv1alpha1.PolicyRepository {
	GinkgoHelper()
	return waitPolicyRepository(ctx, pr, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAppliedRevision).To(Equal(revision))
		g.Expect(prepoCondition(r, gitopsv1alpha1.ConditionReady)).To(HaveField("Status", metav1.ConditionTrue))
	})
}

func prepoCondition(r *gitopsv1alpha1.PolicyRepository, typ string) *metav1.Condition {
	for i := range r.Status.Conditions {
		if r.Status.Conditions[i].Type == typ {
			return &r.Status.Conditions[i]
		}
	}
	return nil
}

// push calls charter's receiver the way GitHub does after a push: the body
// signed with the shared token in X-Hub-Signature-256.
func push(ctx context.Context, receiver string, pr *gitopsv1alpha1.PolicyRepository, token []byte) {
	GinkgoHelper()
	body := []byte(`{"ref":"refs/heads/main"}`)
	mac := hmac.New(sha256.New, token)
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, receiver+"/hooks/"+pr.Namespace+"/"+pr.Name, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	Expect(resp.StatusCode).To(Equal(http.StatusAccepted), "receiver answered %s: %s", resp.Status, msg)
}

// e2eGitRepo is a Git repository on this machine that charter syncs over
// file://.
type e2eGitRepo struct {
	dir  string
	repo *git.Repository
}

func newE2EGitRepo(dir string) *e2eGitRepo {
	GinkgoHelper()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	Expect(err).NotTo(HaveOccurred())
	return &e2eGitRepo{dir: dir, repo: r}
}

// commitStep copies testdata/gitops/<step> over the work tree, commits it
// and returns the revision charter reports, "main@sha1:<hash>".
func (g *e2eGitRepo) commitStep(step string) string {
	GinkgoHelper()
	src := filepath.Join("testdata", "gitops", step)
	Expect(filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(g.dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})).To(Succeed())
	wt, err := g.repo.Worktree()
	Expect(err).NotTo(HaveOccurred())
	Expect(wt.AddGlob(".")).To(Succeed())
	hash, err := wt.Commit(step, &git.CommitOptions{
		Author: &object.Signature{Name: "e2e", Email: "e2e@example.com", When: time.Now()},
	})
	Expect(err).NotTo(HaveOccurred())
	return "main@sha1:" + hash.String()
}
