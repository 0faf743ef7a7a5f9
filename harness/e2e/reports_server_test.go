package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/harness/cluster"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/localpg"
	"github.com/charter-dev/charter/internal/reportsserver"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

const (
	reportsServerCharterNS = "e2e-reports-server-charter"
	// The README tour's namespace (examples/pods).
	reportsServerTourNS = "demo"
)

var (
	apiServicesResource   = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	policyReportsResource = policyreportv1alpha2.GroupVersion.WithResource("policyreports")
)

// The reports-server specs walk the README's tour (docs: README "A
// five-minute tour") with reports in PostgreSQL: the report CRDs leave the
// suite's cluster, charter reports-server serves the report APIs from a
// private PostgreSQL through APIServices, as `charter dev
// --reports-store=postgres` runs it (reportsserver.StartLocal), and
// `charter serve --controllers=admission,reports` with environments/dev's
// policies writes and reads reports through them unchanged. The CRDs come
// back when the tree ends, for the spec trees that share the cluster. The
// APIServices name an ExternalName Service for localhost: only the local
// control plane's API server reaches this machine that way.
var _ = Describe("Reports in PostgreSQL", Label("reports-server"), Ordered, func() {
	var (
		local                 *reportsserver.Local
		privileged, compliant *unstructured.Unstructured
	)

	BeforeAll(func(ctx SpecContext) {
		skipUnlessReportsServerRuns()
		local = serveReportsFromPostgres(ctx)
		// Deleted before the reports server stops: its reports go with it.
		DeferCleanup(func(ctx SpecContext) { deleteNamespaces(ctx, reportsServerTourNS) }, NodeTimeout(3*time.Minute))
		applyEnvironment(ctx, "environments/dev")
		createNamespaces(ctx, reportsServerCharterNS)
		startCharterWith(ctx, reportsServerCharterNS, "admission,reports")
		waitPolicyWebhook(ctx)
	}, NodeTimeout(8*time.Minute))

	It("serves the report APIs from charter reports-server, with no CRD for them", func(ctx SpecContext) {
		for _, name := range []string{"policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io", "reports.openreports.io", "clusterreports.openreports.io"} {
			_, err := suite.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CRD %s: %v, want NotFound", name, err)
		}
		for _, name := range []string{"v1alpha2.wgpolicyk8s.io", "v1alpha1.openreports.io"} {
			svc, err := suite.dynamic.Resource(apiServicesResource).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			service, _, _ := unstructured.NestedString(svc.Object, "spec", "service", "name")
			Expect(service).To(Equal(reportsserver.LocalService), "APIService %s", name)
		}
	}, SpecTimeout(time.Minute))

	It("reports the tour's Pods, seen by a watch and stored in PostgreSQL: the privileged one fails, the compliant one passes", func(ctx SpecContext) {
		reports := suite.dynamic.Resource(policyReportsResource).Namespace(reportsServerTourNS)
		before, err := reports.List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		w, err := reports.Watch(ctx, metav1.ListOptions{ResourceVersion: before.GetResourceVersion()})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()

		compliant = createExample(ctx, "examples/pods/compliant.yaml", "Pod")
		privileged = createExample(ctx, "examples/pods/privileged.yaml", "Pod")
		// Minutes, not seconds: an admission's result waits for the Pod to
		// be stored, and CI's 2 cores are shared.
		Eventually(func(g Gomega) {
			rep, err := reportOf(ctx, privileged)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resultStrings(rep.Results)).To(ContainElement("disallow-privileged-containers/privileged-containers=fail"))
			rep, err = reportOf(ctx, compliant)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rep.Summary.Pass).To(BeNumerically(">", 0))
			g.Expect(rep.Summary.Fail).To(BeZero(), "the compliant Pod's results: %v", resultStrings(rep.Results))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

		seen := map[string]bool{}
		Eventually(func() map[string]bool {
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						return seen
					}
					if u, isObj := ev.Object.(*unstructured.Unstructured); isObj && (ev.Type == watch.Added || ev.Type == watch.Modified) {
						seen[u.GetName()] = true
					}
				default:
					return seen
				}
			}
		}).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).Should(And(
			HaveKey(string(privileged.GetUID())), HaveKey(string(compliant.GetUID()))), "the watch from before the Pods")

		conn, err := pgx.Connect(ctx, local.DSN())
		Expect(err).NotTo(HaveOccurred())
		defer conn.Close(context.Background())
		for _, pod := range []*unstructured.Unstructured{privileged, compliant} {
			var n int
			Expect(conn.QueryRow(ctx, "SELECT count(*) FROM charter_objects WHERE key LIKE $1",
				"%/policyreports/"+reportsServerTourNS+"/"+string(pod.GetUID())).Scan(&n)).To(Succeed())
			Expect(n).To(Equal(1), "rows in PostgreSQL for the report of Pod %s", pod.GetName())
		}
	}, SpecTimeout(5*time.Minute))

	It("lists them as kubectl get polr does, by label and page by page", func(ctx SpecContext) {
		table := reportsTable(ctx, reportsServerTourNS)
		var names []string
		for _, row := range table.Rows {
			names = append(names, fmt.Sprint(row.Cells[2]))
		}
		Expect(names).To(ContainElements("privileged", "compliant"), "kubectl get polr -n %s", reportsServerTourNS)

		reports := suite.dynamic.Resource(policyReportsResource).Namespace(reportsServerTourNS)
		opts := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=charter", Limit: 1}
		var paged []string
		for pages := 0; ; pages++ {
			Expect(pages).To(BeNumerically("<", 10), "pages of one report")
			list, err := reports.List(ctx, opts)
			Expect(err).NotTo(HaveOccurred())
			Expect(len(list.Items)).To(BeNumerically("<=", 1))
			for _, item := range list.Items {
				paged = append(paged, item.GetName())
			}
			if list.GetContinue() == "" {
				break
			}
			opts.Continue = list.GetContinue()
		}
		Expect(paged).To(ContainElements(string(privileged.GetUID()), string(compliant.GetUID())))
		none, err := reports.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=someone-else"})
		Expect(err).NotTo(HaveOccurred())
		Expect(none.Items).To(BeEmpty())
	}, SpecTimeout(time.Minute))

	It("gates the promotion on them: refused while the privileged Pod fails, then Enforce denies it", func(ctx SpecContext) {
		err := setEnforcement(ctx, suite.client, reportsServerTourNS, "enforce")
		Expect(err).To(MatchError(And(
			ContainSubstring(`namespace "demo" cannot be labelled charter.dev/enforcement=enforce`),
			ContainSubstring("Pod/privileged ("))))
		Expect(suite.client.Delete(ctx, privileged)).To(Succeed())
		Eventually(func() error {
			return setEnforcement(ctx, suite.client, reportsServerTourNS, "enforce")
		}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "promoting demo once the privileged Pod is gone")

		again := libraryObjects(filepath.Join(suite.root, "examples/pods/privileged.yaml"))[1]
		err = suite.client.Create(ctx, again)
		// The staged restricted set enforces in demo now; the baseline
		// set still audits.
		Expect(err).To(MatchError(ContainSubstring("disallow-privilege-escalation")), "the privileged Pod in an enforcing demo")
		Expect(setEnforcement(ctx, suite.client, reportsServerTourNS, "")).To(Succeed(), "back to Audit")
	}, SpecTimeout(4*time.Minute))
})

// serveReportsFromPostgres takes the report CRDs out of the suite's
// cluster and serves the report APIs from PostgreSQL instead
// (reportsserver.StartLocal), until the spec tree ends.
func serveReportsFromPostgres(ctx context.Context) *reportsserver.Local {
	GinkgoHelper()
	gvs := takeReportCRDsOut(ctx)
	By("serving the report APIs from PostgreSQL")
	local, err := reportsserver.StartLocal(ctx, suite.config, suite.provider.KubeconfigPath())
	DeferCleanup(func(ctx SpecContext) {
		deleteReportAPIServices(ctx, gvs)
		Expect(local.Shutdown()).To(Succeed())
	}, NodeTimeout(2*time.Minute))
	Expect(err).NotTo(HaveOccurred())
	return local
}

// takeReportCRDsOut deletes the report CRDs from the suite's cluster and
// waits until kube-apiserver no longer serves their group versions, which
// it returns; the spec tree's end puts them back.
func takeReportCRDsOut(ctx context.Context) []schema.GroupVersion {
	GinkgoHelper()
	crds, err := controlplane.ReadCRDs(suite.crdDir)
	Expect(err).NotTo(HaveOccurred())
	gvs, err := reportsserver.GroupVersions()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		By("putting the report CRDs back")
		Expect(controlplane.ApplyCRDs(ctx, suite.config, crds)).To(Succeed())
		Expect(reportsserver.WaitAvailable(ctx, suite.config, gvs)).To(Succeed())
	}, NodeTimeout(3*time.Minute))

	By("taking the report CRDs out of the cluster")
	for _, crd := range crds {
		if !reportsserver.ServesCRD(crd) {
			continue
		}
		Expect(client.IgnoreNotFound(suite.crds.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}))).To(Succeed())
	}
	// kube-apiserver removes the APIServices it made for the CRDs' group
	// versions once they are gone; the reports server's take their names.
	for _, gv := range gvs {
		name := gv.Version + "." + gv.Group
		Eventually(func() bool {
			_, err := suite.dynamic.Resource(apiServicesResource).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(2*time.Minute).WithPolling(250*time.Millisecond).Should(BeTrue(), "APIService %s of the deleted CRDs", name)
	}
	return gvs
}

// deleteReportAPIServices deletes the reports server's APIServices, so
// that kube-apiserver stops routing to it before it stops.
func deleteReportAPIServices(ctx context.Context, gvs []schema.GroupVersion) {
	GinkgoHelper()
	for _, gv := range gvs {
		Expect(client.IgnoreNotFound(suite.dynamic.Resource(apiServicesResource).Delete(ctx, gv.Version+"."+gv.Group, metav1.DeleteOptions{}))).To(Succeed())
	}
}

// skipUnlessReportsServerRuns skips a spec tree where the reports server
// cannot run beside the cluster: it needs the local control plane, whose
// API server reaches this machine as localhost, and PostgreSQL (a failure
// instead when CHARTER_REQUIRE_POSTGRES is set).
func skipUnlessReportsServerRuns() {
	skipUnlessClusterReachesCharter()
	if suite.provider.Name() != cluster.LocalProvider {
		Skip("the reports server runs on this machine, which only the local control plane's API server reaches as localhost")
	}
	if _, err := localpg.BinDir(); errors.Is(err, localpg.ErrNotInstalled) {
		if os.Getenv(localpg.RequireEnv) != "" {
			Fail(fmt.Sprintf("%v (%s is set)", err, localpg.RequireEnv))
		}
		Skip(fmt.Sprintf("%v; set %s to make this a failure", err, localpg.RequireEnv))
	}
}

// applyEnvironment creates the objects of one of this checkout's
// environments, built as gitsync builds it, until the spec tree ends.
func applyEnvironment(ctx context.Context, dir string) {
	GinkgoHelper()
	objs, err := build.Build(ctx, suite.root, dir)
	Expect(err).NotTo(HaveOccurred())
	for _, obj := range objs {
		createEventually(ctx, suite.client, obj.Unstructured)
	}
}

// createExample creates the objects of one of the README's example files,
// as kubectl apply -f does on a fresh cluster (a Namespace already there
// is left as it is), and returns the one of kind.
func createExample(ctx context.Context, file, kind string) *unstructured.Unstructured {
	GinkgoHelper()
	var found *unstructured.Unstructured
	for _, obj := range libraryObjects(filepath.Join(suite.root, file)) {
		err := suite.client.Create(ctx, obj)
		if err != nil && !(apierrors.IsAlreadyExists(err) && obj.GetKind() == "Namespace") {
			Expect(err).NotTo(HaveOccurred(), "%s: %s %s", file, obj.GetKind(), obj.GetName())
		}
		if obj.GetKind() == kind {
			found = obj
		}
	}
	Expect(found).NotTo(BeNil(), "%s has no %s", file, kind)
	Expect(strings.TrimSpace(string(found.GetUID()))).NotTo(BeEmpty())
	return found
}
