package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// Names of the repository security specs.
const (
	secReposCharterNamespace = "e2e-sec-repos-charter"
	secReposNamespace        = "e2e-sec-repos-team"
	secReposAttacker         = "e2e-sec-repos-attacker"
	// secReposPlatformManager places what the platform puts in the
	// tenant's namespace.
	secReposPlatformManager = "platform-team"
	// secReposMinInterval is charter's --gitsync-min-interval here.
	secReposMinInterval = 5 * time.Second
	// secReposMaxFiles and secReposMaxBytes are charter's
	// --gitsync-max-files and --gitsync-max-repository-size here: what a
	// revision of the other specs holds, with room to spare.
	secReposMaxFiles = 20
	secReposMaxBytes = 1 << 20
)

// The attacker holds the admin ClusterRole in one namespace, and may keep
// PolicyRepositories there (the platform lets tenants sync their own
// policies), and nothing else. Each spec is an attempt to reach beyond
// that namespace, or beyond the cluster, through a repository.
var _ = Describe("Security: repositories", Label("security"), Ordered, func() {
	var (
		attacker client.Client
		git      *secReposGitServer
	)

	BeforeAll(func(ctx SpecContext) {
		// The Git server listens on loopback, where charter runs.
		skipUnlessClusterReachesCharter()
		cl := suite.client
		for _, ns := range []string{secReposCharterNamespace, secReposNamespace} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		// admin in the namespace, as a tenant holds it, and the
		// PolicyRepositories of that namespace.
		attacker = namespaceAdmin(ctx, secReposAttacker, secReposNamespace, policyWriter(gitopsv1alpha1.GroupVersion.Group, "policyrepositories"))

		git = newSecReposGitServer(GinkgoT().TempDir())
		startCharterWith(ctx, secReposCharterNamespace, "gitsync",
			"--gitsync-cache-dir="+GinkgoT().TempDir(),
			"--gitsync-min-interval="+secReposMinInterval.String(),
			"--gitsync-max-files="+strconv.Itoa(secReposMaxFiles),
			"--gitsync-max-repository-size="+strconv.Itoa(secReposMaxBytes))
	}, NodeTimeout(2*time.Minute))

	// newRepository creates, as the attacker, a PolicyRepository of the
	// tenant's namespace.
	newRepository := func(ctx SpecContext, name, url string, mutate ...func(*gitopsv1alpha1.PolicyRepository)) *gitopsv1alpha1.PolicyRepository {
		GinkgoHelper()
		pr := &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: secReposNamespace, Name: name},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{
				URL:      url,
				Ref:      &gitopsv1alpha1.GitRef{Branch: "main"},
				Interval: &metav1.Duration{Duration: secReposMinInterval},
			},
		}
		for _, m := range mutate {
			m(pr)
		}
		Expect(attacker.Create(ctx, pr)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, pr))).To(Succeed()) })
		return pr
	}
	It("cannot take over, then prune, a ConfigMap the platform placed in the tenant's namespace", func(ctx SpecContext) {
		By("the platform placing a ConfigMap in the tenant's namespace")
		platform := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: secReposNamespace, Name: "platform-settings"},
			Data:       map[string]string{"egress": "restricted"},
		}
		Expect(suite.client.Create(ctx, platform, client.FieldOwner(secReposPlatformManager))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, platform))).To(Succeed()) })

		By("committing the same ConfigMap, with the attacker's value, to the tenant's repository")
		repo := git.newRepository("takeover")
		rev := commitFiles(repo, map[string]string{
			"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: platform-settings}\ndata: {egress: open}\n",
		})
		pr := newRepository(ctx, "takeover", git.url("takeover"))
		msg := repositoryStalledWith(ctx, pr, rev.name, gitopsv1alpha1.ReasonConflict)
		Expect(msg).To(ContainSubstring("settings.yaml: ConfigMap/" + secReposNamespace + "/platform-settings: conflict: .data.egress held by field manager \"" + secReposPlatformManager + "\""))
		Expect(msg).To(ContainSubstring("not taken over without spec.force"))
		Expect(suite.client.Get(ctx, client.ObjectKeyFromObject(platform), platform)).To(Succeed())
		Expect(platform.Data).To(HaveKeyWithValue("egress", "restricted"))

		By("removing it from the repository, which must not prune the platform's ConfigMap")
		rev = commitFiles(repo, map[string]string{
			"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tenant-settings}\ndata: {egress: open}\n",
		})
		repositoryReadyAt(ctx, pr, rev.name)
		Consistently(func(g Gomega) {
			g.Expect(suite.client.Get(ctx, client.ObjectKeyFromObject(platform), platform)).To(Succeed())
			g.Expect(platform.Data).To(HaveKeyWithValue("egress", "restricted"))
		}).WithTimeout(2 * secReposMinInterval).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(90*time.Second))

	It("cannot make charter fetch a URL through a kustomize configMapGenerator", func(ctx SpecContext) {
		var requests atomic.Int32
		secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			_, _ = w.Write([]byte("instance-credentials"))
		}))
		DeferCleanup(secret.Close)

		repo := git.newRepository("fetch")
		rev := commitFiles(repo, map[string]string{
			"kustomization.yaml": "configMapGenerator:\n- name: stolen\n  files: [creds=" + secret.URL + "/latest/meta-data/credentials]\n",
		})
		pr := newRepository(ctx, "fetch", git.url("fetch"))
		msg := repositoryStalledWith(ctx, pr, rev.name, gitopsv1alpha1.ReasonBuildFailed)
		Expect(msg).To(ContainSubstring(`kustomization.yaml: configMapGenerator[0].files[0]: "creds=` + secret.URL + `/latest/meta-data/credentials" is remote`))
		Expect(requests.Load()).To(BeZero(), "charter fetched the URL")
		var cms corev1.ConfigMapList
		Expect(suite.client.List(ctx, &cms, client.InNamespace(secReposNamespace))).To(Succeed())
		for _, cm := range cms.Items {
			Expect(cm.Name).NotTo(HavePrefix("stolen"), "a ConfigMap holds what the URL answered")
		}
	}, SpecTimeout(90*time.Second))

	It("cannot make charter poll its Git server every millisecond", func(ctx SpecContext) {
		repo := git.newRepository("fast")
		rev := commitFiles(repo, map[string]string{
			"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fast-settings}\ndata: {a: b}\n",
		})
		pr := newRepository(ctx, "fast", git.url("fast"), func(pr *gitopsv1alpha1.PolicyRepository) {
			pr.Spec.Interval = &metav1.Duration{Duration: time.Millisecond}
			pr.Spec.RetryInterval = &metav1.Duration{Duration: time.Millisecond}
		})
		got := repositoryReadyAt(ctx, pr, rev.name)
		Expect(prepoCondition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring(
			"spec.interval 1ms and spec.retryInterval 1ms is below charter's minimum interval 5s (serve --gitsync-min-interval): syncing every 5s"))

		By("counting the ref listings charter asks of the Git server over two minimum intervals")
		before := git.refLists("fast")
		time.Sleep(2 * secReposMinInterval)
		Expect(git.refLists("fast") - before).To(BeNumerically("<=", 3))
	}, SpecTimeout(90*time.Second))

	It("cannot give charter a sync that times out after a millisecond", func(ctx SpecContext) {
		pr := &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: secReposNamespace, Name: "hasty"},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{
				URL:     git.url("hasty"),
				Ref:     &gitopsv1alpha1.GitRef{Branch: "main"},
				Timeout: &metav1.Duration{Duration: time.Millisecond},
			},
		}
		err := attacker.Create(ctx, pr)
		if err == nil {
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, pr))).To(Succeed()) })
		}
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "creating a PolicyRepository with spec.timeout 1ms: %v", err)
		Expect(err).To(MatchError(And(ContainSubstring("spec.timeout"), ContainSubstring("must be at least 1s"))))
	}, SpecTimeout(30*time.Second))

	It("cannot make charter check out a repository of more files or bytes than it allows", func(ctx SpecContext) {
		for _, attack := range []struct {
			name, over string
			files      map[string]string
		}{
			{name: "many-files", over: fmt.Sprintf("more than %d files", secReposMaxFiles), files: secReposConfigMaps("many-files", secReposMaxFiles+5)},
			{name: "large", over: fmt.Sprintf("more than %d bytes", secReposMaxBytes), files: func() map[string]string {
				files := secReposConfigMaps("large", 1)
				// Random, so that Git's compression does not shrink it.
				padding := make([]byte, secReposMaxBytes)
				_, err := rand.Read(padding)
				Expect(err).NotTo(HaveOccurred())
				files["padding.txt"] = hex.EncodeToString(padding)
				return files
			}()},
		} {
			By("committing a revision of " + attack.over + " to repository " + attack.name)
			rev := commitFiles(git.newRepository(attack.name), attack.files)
			pr := newRepository(ctx, attack.name, git.url(attack.name))
			msg := repositoryStalledWith(ctx, pr, rev.name, gitopsv1alpha1.ReasonLimitExceeded)
			Expect(msg).To(ContainSubstring("revision %s: the checkout holds %s", rev.name, attack.over))
			var cms corev1.ConfigMapList
			Expect(suite.client.List(ctx, &cms, client.InNamespace(secReposNamespace))).To(Succeed())
			for _, cm := range cms.Items {
				Expect(cm.Name).NotTo(HavePrefix(attack.name), "a ConfigMap of the revision over the limit was applied")
			}
		}
	}, SpecTimeout(2*time.Minute))

	It("cannot make charter read a repository from its own disk over file://", func(ctx SpecContext) {
		repo := newE2EGitRepo(filepath.Join(GinkgoT().TempDir(), "on-charters-disk"))
		commitFiles(repo, map[string]string{
			"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-disk}\ndata: {a: b}\n",
		})
		pr := newRepository(ctx, "disk", "file://"+repo.dir)
		msg := repositoryStalledWith(ctx, pr, "", gitopsv1alpha1.ReasonNotPermitted)
		Expect(msg).To(ContainSubstring("spec.url: a file:// URL reads charter's own disk; only repositories in charter's namespace " + secReposCharterNamespace + " may use one"))
		err := suite.client.Get(ctx, client.ObjectKey{Namespace: secReposNamespace, Name: "from-disk"}, &corev1.ConfigMap{})
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		Expect(err).To(HaveOccurred(), "the ConfigMap of the repository on charter's disk was applied")
	}, SpecTimeout(90*time.Second))
})

// secReposGitServer serves the Git repositories under a folder over smart
// HTTP on loopback (git http-backend), as a tenant's Git host would, and
// counts the ref listings of each.
type secReposGitServer struct {
	root string
	base string

	mu     sync.Mutex
	counts map[string]*atomic.Int32
}

func newSecReposGitServer(root string) *secReposGitServer {
	GinkgoHelper()
	out, err := exec.Command("git", "--exec-path").Output()
	Expect(err).NotTo(HaveOccurred(), "git --exec-path: install git")
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	_, err = os.Stat(backend)
	Expect(err).NotTo(HaveOccurred(), "git http-backend")
	s := &secReposGitServer{root: root, counts: map[string]*atomic.Int32{}}
	handler := &cgi.Handler{
		Path: backend,
		Root: "/git",
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_GLOBAL=" + os.DevNull,
			"GIT_CONFIG_NOSYSTEM=true",
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") {
			name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/git/"), "/info/refs")
			s.counter(name).Add(1)
		}
		handler.ServeHTTP(w, r)
	}))
	DeferCleanup(srv.Close)
	s.base = srv.URL + "/git/"
	return s
}

func (s *secReposGitServer) counter(name string) *atomic.Int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.counts[name]
	if !ok {
		c = &atomic.Int32{}
		s.counts[name] = c
	}
	return c
}

func (s *secReposGitServer) newRepository(name string) *e2eGitRepo {
	GinkgoHelper()
	return newE2EGitRepo(filepath.Join(s.root, name))
}

func (s *secReposGitServer) url(name string) string { return s.base + name }

func (s *secReposGitServer) refLists(name string) int { return int(s.counter(name).Load()) }

// secReposConfigMaps are n files of a repository, each a ConfigMap named
// prefix-<i>.
func secReposConfigMaps(prefix string, n int) map[string]string {
	files := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		files[name+".yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {a: b}\n"
	}
	return files
}
