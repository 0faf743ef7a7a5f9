package gitsync

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/clitest"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/imagetest"
	"github.com/charter-dev/charter/webhook/status"
)

// The suite shares one real control plane and one manager running the
// reconciler; every test works in its own namespace with its own policy
// names.
var (
	testClient client.Client
	// testConfig is the control plane's administrator: what a test reads
	// the whole cluster with.
	testConfig *rest.Config
	testScheme = runtime.NewScheme()
)

// charterNamespace is charter's namespace in the suite: its repositories
// write with the manager's own identity.
const charterNamespace = "charter"

// platformServiceAccount is the ServiceAccount every namespace newNamespace
// makes holds, bound to cluster-admin: newPolicyRepository's repositories
// run as it, so that tests of syncing itself are not about tenancy.
const platformServiceAccount = "platform"

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(testScheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(testScheme))
	utilruntime.Must(gitopsv1alpha1.AddToScheme(testScheme))
	// Every served version of every Kyverno kind, as charter serve's
	// scheme has them: the pre-apply check decodes and compiles only the
	// kinds its scheme knows.
	utilruntime.Must(versions.AddToScheme(testScheme))
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	// The host's git configuration must not leak into the git servers.
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "true")
	ctrl.SetLogger(testLogger())

	root, err := controlplane.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// kube-apiserver runs with RBAC authorization (envtest's default): the
	// manager is cluster admin, a tenant's ServiceAccount only what a test
	// binds it, which the tenancy tests rely on.
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer cp.Stop()
	testConfig = cp.RESTConfig()

	mgr, err := ctrl.NewManager(cp.RESTConfig(), ctrl.Options{
		Scheme:  testScheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cacheDir, err := os.MkdirTemp("", "gitsync-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(cacheDir)
	authz, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := Setup(mgr, Options{CacheDir: cacheDir, Tenancy: Tenancy{Namespace: charterNamespace, AllowFileURLs: true}, Tests: clitest.RepositoryTests{},
		// The pre-apply check asks what backgroundUser may write,
		// cleanupUser delete and admissionUser list and get, as charter
		// serve's gitsync asks about charter-background, charter-cleanup
		// and charter-admission; bindControllers gives them ConfigMaps.
		BackgroundWriter: controllerIdentity(authz, backgroundUser),
		CleanupDeleter:   controllerIdentity(authz, cleanupUser),
		AdmissionReader:  controllerIdentity(authz, admissionUser),
		// The OCI tests' registries listen on loopback, which the egress
		// guard lets through only when told.
		Egress: imagetest.LoopbackEgress(), PublicTrust: suiteTrust}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The tests read what the reconciler wrote straight from the API
	// server: the manager's cached client serves each kind from its own
	// informer, so a repository's status could be seen applied before
	// the policy it applied reached the policy informer (TestTestGate
	// read the previous revision's ClusterPolicy so, under load).
	if testClient, err = client.New(cp.RESTConfig(), client.Options{Scheme: testScheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := testClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: charterNamespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := bindControllers(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "binding the controllers' ServiceAccounts:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "manager cache did not sync")
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}

// backgroundUser, cleanupUser and admissionUser are the background and
// cleanup controllers' and policy admission's ServiceAccounts the
// pre-apply check asks about.
var (
	backgroundUser = serviceaccount.MakeUsername(charterNamespace, "charter-background")
	cleanupUser    = serviceaccount.MakeUsername(charterNamespace, "charter-cleanup")
	admissionUser  = serviceaccount.MakeUsername(charterNamespace, "charter-admission")
)

// controllerIdentity asks the API server what username may do, as
// charter serve asks about a controller running in another process.
func controllerIdentity(cs kubernetes.Interface, username string) *policycheck.Writer {
	return &policycheck.Writer{User: username, Access: status.SubjectAccess{Client: cs.AuthorizationV1(), User: username,
		Groups: append(serviceaccount.MakeGroupNames(charterNamespace), user.AllAuthenticated)}}
}

// bindControllers lets the background and cleanup controllers'
// ServiceAccounts write and delete ConfigMaps anywhere, as charter's
// config/rbac/background/downstream.yaml does for the background
// controller, and nothing else a test generates or deletes.
func bindControllers(ctx context.Context) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "gitsync-test-controllers"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	if err := testClient.Create(ctx, role); err != nil {
		return err
	}
	return testClient.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gitsync-test-controllers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.ServiceAccountKind, Namespace: charterNamespace, Name: "charter-background"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: charterNamespace, Name: "charter-cleanup"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: charterNamespace, Name: "charter-admission"},
		},
	})
}

// testLogger is silent unless GITSYNC_TEST_DEBUG is set.
func testLogger() logr.Logger {
	if os.Getenv("GITSYNC_TEST_DEBUG") == "" {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
}

// newNamespace creates a namespace for one test, with the
// platformServiceAccount bound to cluster-admin.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := newTenantNamespace(t)
	bindClusterRole(t, ns, platformServiceAccount, "cluster-admin")
	return ns
}

// newTenantNamespace creates a namespace for one test whose
// ServiceAccounts may do nothing until a test binds them a role.
func newTenantNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gitsync-"}}
	if err := testClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// grantPolicyWriter lets the ServiceAccount ns/deployer use verbs on
// Policies in ns, through the Role policy-writer.
func grantPolicyWriter(t *testing.T, ns string, verbs ...string) {
	t.Helper()
	ctx := context.Background()
	if err := testClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policy-writer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"kyverno.io"}, Resources: []string{"policies"}, Verbs: verbs}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := testClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "policy-writer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "deployer"}},
	}); err != nil {
		t.Fatal(err)
	}
}

// bindClusterRole binds a ClusterRole to the ServiceAccount ns/name
// cluster-wide.
func bindClusterRole(t *testing.T, ns, name, role string) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gitsync-test-" + ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if err := testClient.Create(context.Background(), binding); err != nil {
		t.Fatal(err)
	}
}

// newPolicyRepository creates a PolicyRepository polling every second,
// run as the platformServiceAccount of its namespace.
func newPolicyRepository(t *testing.T, ns, url string, mutate ...func(*gitopsv1alpha1.PolicyRepository)) *gitopsv1alpha1.PolicyRepository {
	t.Helper()
	repo := &gitopsv1alpha1.PolicyRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policies"},
		Spec: gitopsv1alpha1.PolicyRepositorySpec{
			URL:                url,
			Ref:                &gitopsv1alpha1.GitRef{Branch: "main"},
			Interval:           &metav1.Duration{Duration: time.Second},
			ServiceAccountName: platformServiceAccount,
		},
	}
	for _, m := range mutate {
		m(repo)
	}
	if err := testClient.Create(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	return repo
}

// waitTimeout bounds every wait for the reconciler: generous, as a loaded
// 2-core CI machine may take seconds per reconcile; a condition that holds
// ends the wait at once.
const waitTimeout = 30 * time.Second

// eventually returns the PolicyRepository once cond holds.
func eventually(t *testing.T, repo *gitopsv1alpha1.PolicyRepository, cond func(g Gomega, r *gitopsv1alpha1.PolicyRepository)) *gitopsv1alpha1.PolicyRepository {
	t.Helper()
	got := &gitopsv1alpha1.PolicyRepository{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(testClient.Get(context.Background(), client.ObjectKeyFromObject(repo), got)).To(Succeed())
		cond(g, got)
	}).WithTimeout(waitTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return got
}

// readyAt waits until revision is applied and Ready.
func readyAt(t *testing.T, repo *gitopsv1alpha1.PolicyRepository, revision string) *gitopsv1alpha1.PolicyRepository {
	t.Helper()
	return eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAppliedRevision).To(Equal(revision))
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady)).To(HaveField("Status", metav1.ConditionTrue))
		g.Expect(r.Status.ObservedGeneration).To(Equal(r.Generation))
	})
}

// stalledAt waits until the repository attempted revision and is Stalled
// on it.
func stalledAt(t *testing.T, repo *gitopsv1alpha1.PolicyRepository, revision string) *gitopsv1alpha1.PolicyRepository {
	t.Helper()
	return eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAttemptedRevision).To(Equal(revision))
		g.Expect(condition(r, gitopsv1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
	})
}

func condition(r *gitopsv1alpha1.PolicyRepository, typ string) metav1.Condition {
	for _, c := range r.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{Type: typ, Status: "Absent"}
}

// getPolicy returns a ClusterPolicy, or nil when it does not exist.
func getPolicy(t *testing.T, name string) *kyvernov1.ClusterPolicy {
	t.Helper()
	p := &kyvernov1.ClusterPolicy{}
	err := testClient.Get(context.Background(), client.ObjectKey{Name: name}, p)
	if err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		t.Fatal(err)
	}
	return p
}

// suiteTrust is the Sigstore trust of the suite's reconciler, as serve's
// --sigstore-tuf-mirror sets it: a test verifying keyless signatures
// points it at its own TUF repository for its duration.
var suiteTrust = &testTrust{}

type testTrust struct {
	mu    sync.Mutex
	trust imageverify.PublicTrust
}

func (s *testTrust) use(t *testing.T, trust imageverify.PublicTrust) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trust = trust
	t.Cleanup(func() { s.mu.Lock(); defer s.mu.Unlock(); s.trust = nil })
}

func (s *testTrust) current() (imageverify.PublicTrust, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trust == nil {
		return nil, errors.New("no Sigstore trust configured for this test")
	}
	return s.trust, nil
}

func (s *testTrust) FulcioRoots(ctx context.Context) ([]*x509.Certificate, error) {
	tr, err := s.current()
	if err != nil {
		return nil, err
	}
	return tr.FulcioRoots(ctx)
}

func (s *testTrust) RekorPubs(ctx context.Context) (*cosign.TrustedTransparencyLogPubKeys, error) {
	tr, err := s.current()
	if err != nil {
		return nil, err
	}
	return tr.RekorPubs(ctx)
}

func (s *testTrust) CTLogPubs(ctx context.Context) (*cosign.TrustedTransparencyLogPubKeys, error) {
	tr, err := s.current()
	if err != nil {
		return nil, err
	}
	return tr.CTLogPubs(ctx)
}
