// Package e2e holds charter's end-to-end suites. They drive charter only
// through the Kubernetes API and its binary, against the cluster
// harness/cluster.FromEnvironment picks: kind when Docker answers, else the
// local control plane; E2E_PROVIDER=kind|local forces one.
//
// Specs that need charter running get it from useCharter: on kind with
// charter's image (make e2e-kind), charter installed in the cluster by its
// Helm chart, shared by the spec trees; elsewhere `charter serve` on this
// machine, out of cluster, with URL webhooks at the provider's
// HostAddress: 127.0.0.1 for local, the kind network's gateway for kind
// on Linux. Spec trees that need charter flags of their own, a restricted
// identity, a restart or something only this machine holds start charter
// serve here on every cluster (startCharterWith). Where the cluster cannot
// reach this machine (kind on Docker Desktop) those skip.
//
// Run them with `make e2e` (E2E_LABELS=foundation,... filters by label).
// Specs are labelled by area: foundation, admission, reports, gitops,
// rbac, tenancy.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	kyvernov2beta1 "github.com/charter-dev/charter/api/kyverno/v2beta1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/harness/cluster"
	"github.com/charter-dev/charter/internal/controlplane"
)

// Environment variables the suite reads, besides cluster.EnvProvider.
const (
	// EnvArtifacts names the folder that receives the cluster's logs when
	// a spec fails (default: a new folder under the system temp folder).
	EnvArtifacts = "E2E_ARTIFACTS"
	// EnvClusterName names the kind cluster (default cluster.DefaultName).
	EnvClusterName = "E2E_CLUSTER_NAME"
	// EnvCharter is the charter binary to test (default: built from this
	// checkout into a temporary folder).
	EnvCharter = "E2E_CHARTER"
)

// suite is what BeforeSuite sets up for the specs.
var suite struct {
	provider cluster.Provider
	config   *rest.Config
	// client knows charter's API types as well as Kubernetes'.
	client  client.Client
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	crds    apiextensionsclient.Interface

	// hostAddress is where the cluster's API server reaches this machine:
	// charter serve, which the specs run here, out of cluster, listens
	// there and names it in its webhook URLs. hostAddressErr says why
	// there is none (kind on Docker Desktop); the specs that run charter
	// skip with it.
	hostAddress    string
	hostAddressErr error

	// charter is the path of the charter binary under test.
	charter string
	// root is the charter checkout; crdDir the CRDs installed from it.
	root, crdDir string

	// setupDone and specsFailed decide whether the cluster's logs are
	// saved before it goes: they are when setup or any spec failed.
	setupDone   bool
	specsFailed bool
}

// scheme holds every type the suite's client reads and writes.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kyvernov1.AddToScheme(scheme))
	utilruntime.Must(kyvernov2.AddToScheme(scheme))
	utilruntime.Must(kyvernov2beta1.AddToScheme(scheme))
	utilruntime.Must(kyvernov2alpha1.AddToScheme(scheme))
	utilruntime.Must(policiesv1.AddToScheme(scheme))
	utilruntime.Must(policyreportv1alpha2.AddToScheme(scheme))
	utilruntime.Must(gitopsv1alpha1.AddToScheme(scheme))
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "charter e2e")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrllog.SetLogger(GinkgoLogr)
	var err error
	suite.root, err = controlplane.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	suite.crdDir = filepath.Join(suite.root, "config", "crd", "bases")

	suite.charter = os.Getenv(EnvCharter)
	if suite.charter == "" {
		By("building charter")
		suite.charter = filepath.Join(GinkgoT().TempDir(), "charter")
		build := exec.CommandContext(ctx, "go", "build", "-o", suite.charter, "./cmd/charter")
		build.Dir = suite.root
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "go build ./cmd/charter:\n%s", out)
	}

	var opts []cluster.Option
	if name := os.Getenv(EnvClusterName); name != "" {
		opts = append(opts, cluster.WithName(name))
	}
	p, sel, err := cluster.FromEnvironment(ctx, opts...)
	Expect(err).NotTo(HaveOccurred())
	suite.provider = p
	By(fmt.Sprintf("starting a %s cluster (%s)", sel.Provider, sel.Reason))
	started := time.Now()
	Expect(p.Start(ctx)).To(Succeed())
	GinkgoWriter.Printf("%s cluster up in %s; KUBECONFIG=%s\n",
		p.Name(), time.Since(started).Round(100*time.Millisecond), p.KubeconfigPath())
	suite.hostAddress, suite.hostAddressErr = p.HostAddress(ctx)
	if suite.hostAddressErr != nil {
		GinkgoWriter.Printf("the specs that run charter will skip: %v\n", suite.hostAddressErr)
	} else {
		GinkgoWriter.Printf("charter serves webhooks at %s, where the cluster reaches this machine\n", suite.hostAddress)
	}

	By("installing charter's CRDs from " + suite.crdDir)
	Expect(cluster.InstallCRDs(ctx, p, suite.crdDir)).To(Succeed())

	suite.config = p.RESTConfig()
	suite.client, err = client.New(suite.config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	suite.kube = kubernetes.NewForConfigOrDie(suite.config)
	suite.dynamic = dynamic.NewForConfigOrDie(suite.config)
	suite.crds = apiextensionsclient.NewForConfigOrDie(suite.config)
	if _, _, ok := inClusterImage(); ok {
		// Before any spec: the specs' own timeouts leave no room for it.
		installCharter(ctx)
	}
	suite.setupDone = true
}, NodeTimeout(10*time.Minute))

var _ = ReportAfterEach(func(report SpecReport) {
	if report.Failed() {
		suite.specsFailed = true
	}
})

var _ = AfterSuite(func(ctx SpecContext) {
	if suite.provider == nil {
		return
	}
	if suite.specsFailed || !suite.setupDone {
		saveLogs(ctx)
	}
	Expect(suite.provider.Stop(ctx)).To(Succeed())
}, NodeTimeout(5*time.Minute))

// saveLogs exports the cluster's logs and says where, on stderr so that
// the path shows whatever the reporter settings.
func saveLogs(ctx SpecContext) {
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "charter-e2e-"+time.Now().Format("20060102-150405"))
	}
	if err := suite.provider.ExportLogs(ctx, dir); err != nil {
		fmt.Fprintf(os.Stderr, "\ne2e: saving the %s cluster's logs to %s failed: %v\n", suite.provider.Name(), dir, err)
		return
	}
	fmt.Fprintf(os.Stderr, "\ne2e: specs failed; the %s cluster's logs are in %s\n", suite.provider.Name(), dir)
}
