package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

const (
	reportsNamespace        = "e2e-reports"
	reportsCharterNamespace = "charter-reports"

	// Policies in testdata/reports.
	reportsRequireOwner   = "e2e-require-owner"   // Audit, background
	reportsRequireTier    = "e2e-require-tier"    // Audit, admission only
	reportsNamespaceOwner = "e2e-namespace-owner" // Audit, background, Namespaces
)

// The reports specs run `charter serve --controllers=admission,reports`
// and read the reports through the API, as users and Policy Reporter do.
// Nothing in them waits for the periodic full rescan (1h by default):
// every result must come from a watch event, a policy change or an
// admission.
var _ = Describe("Reports", Label("reports"), Ordered, func() {
	var (
		cl        client.Client
		stop      func(context.Context)
		legacy    *corev1.Pod // non-compliant before any policy existed
		fresh     *corev1.Pod // created while the admission-only policy audits
		namespace *corev1.Namespace
	)

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: reportsCharterNamespace}})).To(Succeed())
		namespace = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: reportsNamespace}}
		Expect(cl.Create(ctx, namespace)).To(Succeed())
		waitDefaultServiceAccounts(ctx, reportsNamespace)
		legacy = reportsPod("legacy", nil)
		Expect(cl.Create(ctx, legacy)).To(Succeed())

		// charter runs on this machine whatever the cluster: the specs
		// stop it and start it again (a restart), which they time.
		stop = startCharterWith(ctx, reportsCharterNamespace, "admission,reports")
		waitPolicyWebhook(ctx)
		// namespace-owner matches every Namespace: leave no policy behind
		// for the specs that share this cluster.
		DeferCleanup(func(ctx SpecContext) {
			for _, file := range []string{"require-owner.yaml", "require-tier-at-admission.yaml", "namespace-owner.yaml"} {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, reportsPolicy(file)))).To(Succeed())
			}
		})
	}, NodeTimeout(2*time.Minute))

	It("reports fail for a Pod that existed before an Audit policy was added", func(ctx SpecContext) {
		Expect(cl.Create(ctx, reportsPolicy("require-owner.yaml"))).To(Succeed())
		rep := waitReport(ctx, legacy, reportsRequireOwner+"/check-owner=fail")

		Expect(rep.Scope).NotTo(BeNil())
		Expect(*rep.Scope).To(And(
			HaveField("APIVersion", "v1"), HaveField("Kind", "Pod"),
			HaveField("Namespace", reportsNamespace), HaveField("Name", "legacy"), HaveField("UID", legacy.UID)))
		Expect(rep.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Pod"), HaveField("UID", legacy.UID))))
		Expect(rep.Summary).To(Equal(policyreportv1alpha2.PolicyReportSummary{Fail: 1}))
		Expect(rep.Results).To(ConsistOf(And(
			HaveField("Source", "charter"),
			HaveField("Severity", policyreportv1alpha2.SeverityMedium),
			HaveField("Category", "Best Practices"),
			HaveField("Scored", true),
			HaveField("Message", ContainSubstring("label 'owner' is required")),
			HaveField("Properties", HaveKeyWithValue("process", "background scan")),
		)))
	}, SpecTimeout(60*time.Second))

	It("lists reports with kubectl's KIND, NAME, PASS, FAIL, WARN, ERROR and SKIP columns", func(ctx SpecContext) {
		table := reportsTable(ctx, reportsNamespace)
		var names []string
		for _, c := range table.ColumnDefinitions {
			names = append(names, c.Name)
		}
		Expect(names).To(ContainElements("KIND", "NAME", "PASS", "FAIL", "WARN", "ERROR", "SKIP"))
		Expect(names[1:8]).To(Equal([]string{"KIND", "NAME", "PASS", "FAIL", "WARN", "ERROR", "SKIP"}))
		Expect(table.Rows).To(ContainElement(HaveField("Cells", HaveExactElements(
			string(legacy.UID), "Pod", "legacy", BeEquivalentTo(0), BeEquivalentTo(1),
			BeEquivalentTo(0), BeEquivalentTo(0), BeEquivalentTo(0), Not(BeEmpty())))))
	}, SpecTimeout(30*time.Second))

	It("turns the result to pass when the Pod is fixed", func(ctx SpecContext) {
		patch := []byte(`{"metadata":{"labels":{"owner":"team-a"}}}`)
		Expect(cl.Patch(ctx, legacy, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		rep := waitReport(ctx, legacy, reportsRequireOwner+"/check-owner=pass")
		Expect(rep.Summary).To(Equal(policyreportv1alpha2.PolicyReportSummary{Pass: 1}))
	}, SpecTimeout(60*time.Second))

	It("reports an Audit admission without waiting for a rescan", func(ctx SpecContext) {
		// Only the admission webhook evaluates this policy: no scan does.
		Expect(cl.Create(ctx, reportsPolicy("require-tier-at-admission.yaml"))).To(Succeed())
		waitPolicyReady(ctx, reportsRequireTier)
		fresh = reportsPod("fresh", map[string]string{"owner": "team-a"})
		Expect(cl.Create(ctx, fresh)).To(Succeed())
		rep := waitReport(ctx, fresh, reportsRequireOwner+"/check-owner=pass", reportsRequireTier+"/check-tier=fail")
		Expect(rep.Results).To(ContainElement(And(
			HaveField("Policy", reportsRequireTier),
			HaveField("Message", ContainSubstring("label 'tier' is required")),
			HaveField("Properties", HaveKeyWithValue("process", "admission review")),
		)))
	}, SpecTimeout(60*time.Second))

	It("gives a Namespace a ClusterPolicyReport", func(ctx SpecContext) {
		Expect(cl.Create(ctx, reportsPolicy("namespace-owner.yaml"))).To(Succeed())
		Expect(cl.Get(ctx, client.ObjectKeyFromObject(namespace), namespace)).To(Succeed())
		rep := waitClusterReport(ctx, namespace, reportsNamespaceOwner+"/check-owner=fail")
		Expect(rep.Scope).NotTo(BeNil())
		Expect(*rep.Scope).To(And(HaveField("Kind", "Namespace"), HaveField("Name", reportsNamespace), HaveField("UID", namespace.UID)))
		Expect(rep.OwnerReferences).To(ConsistOf(HaveField("UID", namespace.UID)))
	}, SpecTimeout(60*time.Second))

	It("removes a Pod's report with the Pod", func(ctx SpecContext) {
		Expect(cl.Delete(ctx, legacy)).To(Succeed())
		// On kind the Pod runs, and goes only once the kubelet has stopped
		// it, within its 30s grace period; on local it goes at once.
		Eventually(func() error {
			_, err := reportOf(ctx, legacy)
			return err
		}).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Satisfy(apierrors.IsNotFound))
	}, SpecTimeout(75*time.Second))

	It("removes a deleted policy's results and keeps the others", func(ctx SpecContext) {
		Expect(cl.Delete(ctx, reportsPolicy("require-owner.yaml"))).To(Succeed())
		waitReport(ctx, fresh, reportsRequireTier+"/check-tier=fail")
	}, SpecTimeout(60*time.Second))

	It("loses nothing across a restart and catches up with what changed meanwhile", func(ctx SpecContext) {
		before, err := reportOf(ctx, fresh)
		Expect(err).NotTo(HaveOccurred())
		stop(ctx)

		// Changed while no controller runs.
		patch := []byte(`{"metadata":{"labels":{"owner":"platform"}}}`)
		Expect(cl.Patch(ctx, namespace, client.RawPatch(types.MergePatchType, patch))).To(Succeed())

		startCharterWith(ctx, reportsCharterNamespace, "admission,reports")
		waitPolicyWebhook(ctx)
		waitClusterReport(ctx, namespace, reportsNamespaceOwner+"/check-owner=pass")
		// The admission-only result, which no scan can rebuild, is still
		// there, and the report was not even rewritten.
		Consistently(func(g Gomega) {
			rep, err := reportOf(ctx, fresh)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resultStrings(rep.Results)).To(Equal([]string{reportsRequireTier + "/check-tier=fail"}))
			g.Expect(rep.ResourceVersion).To(Equal(before.ResourceVersion))
		}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(2*time.Minute))
})

// waitPolicyWebhook waits until charter's policy validating webhook is
// configured: only then are policies written through charter's admission.
func waitPolicyWebhook(ctx context.Context) {
	GinkgoHelper()
	Eventually(func() error {
		return suite.client.Get(ctx, client.ObjectKey{Name: policyValidatingName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	}).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// reportsPod is a Pod in the reports specs' namespace.
func reportsPod(name string, labels map[string]string) *corev1.Pod {
	p := newPod(name, labels)
	p.Namespace = reportsNamespace
	return p
}

// reportsPolicy reads a ClusterPolicy of testdata/reports.
func reportsPolicy(file string) *kyvernov1.ClusterPolicy {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join("testdata", "reports", file))
	Expect(err).NotTo(HaveOccurred())
	return clusterPolicy(string(data))
}

// reportOf reads the PolicyReport of a namespaced resource: named after
// its UID, in its namespace.
func reportOf(ctx context.Context, obj client.Object) (*policyreportv1alpha2.PolicyReport, error) {
	rep := &policyreportv1alpha2.PolicyReport{}
	err := suite.client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: string(obj.GetUID())}, rep)
	return rep, err
}

// waitReport waits until the resource's report holds exactly the results
// ("policy/rule=result") and returns it.
func waitReport(ctx context.Context, obj client.Object, want ...string) *policyreportv1alpha2.PolicyReport {
	GinkgoHelper()
	var rep *policyreportv1alpha2.PolicyReport
	Eventually(func(g Gomega) {
		var err error
		rep, err = reportOf(ctx, obj)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resultStrings(rep.Results)).To(Equal(sorted(want)))
	}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(),
		"report of %s %s/%s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName())
	return rep
}

// waitClusterReport is waitReport for a cluster-scoped resource.
func waitClusterReport(ctx context.Context, obj client.Object, want ...string) *policyreportv1alpha2.ClusterPolicyReport {
	GinkgoHelper()
	rep := &policyreportv1alpha2.ClusterPolicyReport{}
	Eventually(func(g Gomega) {
		g.Expect(suite.client.Get(ctx, client.ObjectKey{Name: string(obj.GetUID())}, rep)).To(Succeed())
		g.Expect(resultStrings(rep.Results)).To(Equal(sorted(want)))
	}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "report of %s", obj.GetName())
	return rep
}

func resultStrings(results []policyreportv1alpha2.PolicyReportResult) []string {
	out := make([]string, 0, len(results))
	for _, r := range results {
		out = append(out, r.Policy+"/"+r.Rule+"="+string(r.Result))
	}
	return sorted(out)
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// reportsTable lists the PolicyReports of namespace as the server-side
// table kubectl prints.
func reportsTable(ctx context.Context, namespace string) *metav1.Table {
	GinkgoHelper()
	data, err := suite.kube.CoreV1().RESTClient().Get().
		AbsPath("/apis/wgpolicyk8s.io/v1alpha2/namespaces", namespace, "policyreports").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	table := &metav1.Table{}
	Expect(json.Unmarshal(data, table)).To(Succeed())
	return table
}
