package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/harness/install"
)

// EnvCharterImage names charter's image (make image) for the specs that run
// charter inside the cluster, installed with its Helm chart: the `ha`
// specs. make e2e-kind sets it; without it, or on a cluster whose nodes
// run no Pods (local), those specs skip, saying so.
const EnvCharterImage = "E2E_CHARTER_IMAGE"

const (
	haNamespace        = "e2e-ha"
	haReportsNamespace = "e2e-ha-reports"
	haEnforcePolicy    = "e2e-ha-require-team"
	haAuditPolicy      = "e2e-ha-require-owner"
	haReportsLease     = "charter-reports" // config/manager/reports.yaml: --leader-election-id
	haAdmission        = "charter-admission"
	haRelease          = "charter"
	// haClients is how many clients create Pods at once while charter's
	// Pods come and go.
	haClients = 50
	// haScanPods is how many Pods the reports leader scans when it is
	// killed: enough that the scan is still going a moment after the
	// first report is written.
	haScanPods = 600
)

const haEnforce = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: ` + haEnforcePolicy + `
spec:
  background: false
  rules:
    - name: check-team
      match:
        any:
          - resources:
              kinds: [Pod]
              namespaces: [` + haNamespace + `]
      validate:
        failureAction: Enforce
        message: "label 'team' is required"
        pattern:
          metadata:
            labels:
              team: "?*"
`

const haAudit = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: ` + haAuditPolicy + `
spec:
  background: true
  rules:
    - name: check-owner
      match:
        any:
          - resources:
              kinds: [Pod]
              namespaces: [` + haReportsNamespace + `]
      validate:
        failureAction: Audit
        message: "label 'owner' is required"
        pattern:
          metadata:
            labels:
              owner: "?*"
`

// The ha specs install charter from its image with its Helm chart (its
// Deployments, ServiceAccounts, RBAC and Service-routed webhooks) and
// disturb it the way a cluster does: a Pod deleted, a leader killed, a
// rolling upgrade, an uninstall.
var _ = Describe("In-cluster charter", Label("ha"), Ordered, haPriority, func() {
	var (
		cl   client.Client
		helm *install.Helm
	)

	BeforeAll(func(ctx SpecContext) {
		if _, _, ok := inClusterImage(); !ok {
			Skip(fmt.Sprintf("charter runs in the cluster only with its image (%s, set by make e2e-kind) on a cluster whose nodes run Pods (kind); this is %s", EnvCharterImage, suite.provider.Name()))
		}
		cl = suite.client
		DeferCleanup(func(ctx SpecContext) {
			for _, p := range []string{haEnforcePolicy, haAuditPolicy} {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, clusterPolicy("apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata:\n  name: "+p)))).To(Succeed())
			}
			deleteNamespaces(ctx, haNamespace, haReportsNamespace)
		}, NodeTimeout(5*time.Minute))
		// The install the other spec trees share, or a new one.
		helm = installCharter(ctx)

		for _, ns := range []string{haNamespace, haReportsNamespace} {
			Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, haNamespace, haReportsNamespace)

		By("enforcing " + haEnforcePolicy + " through the Service")
		Eventually(func() error {
			return client.IgnoreAlreadyExists(cl.Create(ctx, clusterPolicy(haEnforce)))
		}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func() error {
			return refusedByCharter(ctx, haPod("probe", false))
		}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, NodeTimeout(10*time.Minute))

	It("fails no admission of 50 clients while an admission Pod is deleted", func(ctx SpecContext) {
		pods := &corev1.PodList{}
		Expect(cl.List(ctx, pods, client.InNamespace(charterNamespace), client.MatchingLabels{"app.kubernetes.io/component": "admission"})).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		victim := pods.Items[0]

		load := admissionLoad(ctx, haClients, func() {
			By("deleting admission Pod " + victim.Name)
			Expect(cl.Delete(ctx, &victim)).To(Succeed())
			// The Pod drains (--drain-delay) and goes; only then does
			// the Deployment's status tell of its replacement.
			Eventually(func() bool {
				return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKeyFromObject(&victim), &corev1.Pod{}))
			}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(BeTrue(), "admission Pod %s gone", victim.Name)
			waitRolledOut(ctx, haAdmission, 3*time.Minute)
		})
		load.expectNoFailure()
	}, SpecTimeout(6*time.Minute))

	It("fails no admission during a rolling upgrade of the admission Deployment", func(ctx SpecContext) {
		load := admissionLoad(ctx, haClients, func() {
			By("rolling " + haAdmission + " out again")
			patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"e2e.charter.dev/restarted-at":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: charterNamespace, Name: haAdmission}}
			Expect(cl.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
			waitRolledOut(ctx, haAdmission, 4*time.Minute)
		})
		load.expectNoFailure()
	}, SpecTimeout(6*time.Minute))

	It("finishes a background scan whose leader was killed, losing and duplicating no report", func(ctx SpecContext) {
		By(fmt.Sprintf("creating %d Pods that are never scheduled", haScanPods))
		createUnscheduledPods(ctx, haReportsNamespace, haScanPods)

		leader := leaseHolder(ctx, haReportsLease)
		Expect(leader).NotTo(BeEmpty(), "no reports leader holds Lease %s", haReportsLease)
		// The first report is seen through a watch opened before the scan
		// starts: polling a list of hundreds of reports saw the scan only
		// once it had finished.
		reportsGVR := policyreportv1alpha2.GroupVersion.WithResource("policyreports")
		w, err := suite.dynamic.Resource(reportsGVR).Namespace(haReportsNamespace).Watch(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		Expect(cl.Create(ctx, clusterPolicy(haAudit))).To(Succeed())

		By("killing the reports leader " + leader + " at its first report")
		Eventually(w.ResultChan()).WithTimeout(2*time.Minute).Should(Receive(), "a first report")
		w.Stop()
		Expect(cl.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: charterNamespace, Name: leader}},
			client.GracePeriodSeconds(0))).To(Succeed())
		// Counted after the kill: the reports written by then, and a few
		// more the dying leader may still finish.
		atKill := len(haReports(ctx))
		GinkgoWriter.Printf("%d of %d reports written when the leader was killed\n", atKill, haScanPods)
		Expect(atKill).To(BeNumerically("<", haScanPods), "the scan finished before the leader was killed: raise haScanPods")

		Eventually(func() string { return leaseHolder(ctx, haReportsLease) }).
			WithTimeout(2*time.Minute).WithPolling(time.Second).ShouldNot(Or(BeEmpty(), Equal(leader)), "a new reports leader")

		By("waiting for one report per Pod, each with one result")
		pods := &corev1.PodList{}
		Expect(cl.List(ctx, pods, client.InNamespace(haReportsNamespace))).To(Succeed())
		Eventually(func(g Gomega) {
			reports := haReports(ctx)
			byScope := map[types.UID]int{}
			for _, r := range reports {
				g.Expect(r.Scope).NotTo(BeNil(), "report %s names no resource", r.Name)
				byScope[r.Scope.UID]++
				g.Expect(resultStrings(r.Results)).To(Equal([]string{haAuditPolicy + "/check-owner=fail"}), "results of report %s", r.Name)
			}
			for _, p := range pods.Items {
				g.Expect(byScope[p.UID]).To(Equal(1), "reports of Pod %s", p.Name)
			}
			g.Expect(reports).To(HaveLen(len(pods.Items)))
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	}, SpecTimeout(8*time.Minute))

	It("uninstall removes charter's webhook configurations, so the cluster admits again", func(ctx SpecContext) {
		Expect(helm.Uninstall(3 * time.Minute)).To(Succeed())
		inCluster.helm = nil
		Eventually(func(g Gomega) {
			g.Expect(charterWebhookConfigurations(ctx)).To(BeEmpty())
		}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(cl.Create(ctx, haPod("after-uninstall", false), client.DryRunAll)).To(Succeed())
	}, SpecTimeout(5*time.Minute))
})

// haPod is a Pod of the ha namespace, with the team label the enforced
// policy requires or without it.
func haPod(name string, labelled bool) *corev1.Pod {
	p := newPod(name, nil)
	p.Namespace = haNamespace
	if labelled {
		p.Labels = map[string]string{"team": "a"}
	}
	return p
}

// loadResult counts what the clients of admissionLoad saw.
type loadResult struct {
	admitted, refused atomic.Int64
	mu                sync.Mutex
	failures          []string
}

func (r *loadResult) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) < 20 {
		r.failures = append(r.failures, fmt.Sprintf(format, args...))
	}
}

func (r *loadResult) expectNoFailure() {
	GinkgoHelper()
	GinkgoWriter.Printf("%d Pods admitted, %d refused by the policy\n", r.admitted.Load(), r.refused.Load())
	Expect(r.failures).To(BeEmpty())
	Expect(r.admitted.Load()).To(BeNumerically(">", 0))
	Expect(r.refused.Load()).To(BeNumerically(">", 0))
}

// admissionLoad runs clients that create Pods in the ha namespace without
// pause, from 3 s before disturb runs until 3 s after: every fifth Pod lacks the
// team label and must be refused by charter's policy, every other one
// admitted. Anything else (a webhook that cannot be called, a timeout) is
// a failure. The creations are dry runs: admission, webhooks included,
// runs in full, and nothing is stored.
func admissionLoad(ctx context.Context, clients int, disturb func()) *loadResult {
	GinkgoHelper()
	res := &loadResult{}
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				labelled := i%5 != 0
				reqCtx, cancel := context.WithTimeout(loadCtx, 30*time.Second)
				err := suite.client.Create(reqCtx, haPod(fmt.Sprintf("load-%d-%d", c, i), labelled), client.DryRunAll)
				cancel()
				switch {
				case loadCtx.Err() != nil:
				case labelled && err == nil:
					res.admitted.Add(1)
				case !labelled && err != nil && strings.Contains(err.Error(), `admission webhook "`+validateWebhookFail+`" denied the request`):
					res.refused.Add(1)
				case labelled:
					res.fail("client %d: labelled Pod not admitted: %v", c, err)
				default:
					res.fail("client %d: unlabelled Pod not refused by charter: %v", c, err)
				}
			}
		})
	}
	defer func() {
		time.Sleep(3 * time.Second)
		stop()
		wg.Wait()
	}()
	time.Sleep(3 * time.Second) // every client under way
	disturb()
	return res
}

// waitRolledOut waits until a Deployment of charter's namespace has rolled
// out its latest spec.
func waitRolledOut(ctx context.Context, name string, timeout time.Duration) {
	GinkgoHelper()
	var d appsv1.Deployment
	Eventually(func() bool {
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: charterNamespace, Name: name}, &d); err != nil {
			return false
		}
		return rolledOut(&d)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(BeTrue(), func() string {
		var pods corev1.PodList
		_ = suite.client.List(ctx, &pods, client.InNamespace(charterNamespace))
		var b strings.Builder
		fmt.Fprintf(&b, "Deployment %s rolled out: status %+v\n", name, d.Status)
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "  Pod %s: %s", p.Name, p.Status.Phase)
			for _, c := range p.Status.Conditions {
				if c.Status != corev1.ConditionTrue {
					fmt.Fprintf(&b, " %s=%s (%s)", c.Type, c.Status, c.Message)
				}
			}
			b.WriteString("\n")
		}
		return b.String()
	})
}

// createUnscheduledPods creates n Pods that no node matches: they stay
// Pending, cost the node nothing, and are scanned like any Pod.
func createUnscheduledPods(ctx context.Context, namespace string, n int) {
	GinkgoHelper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 10)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p := newPod(fmt.Sprintf("scan-%d", i), nil)
			p.Namespace = namespace
			p.Spec.NodeSelector = map[string]string{"e2e.charter.dev/no-such-node": "true"}
			errs <- suite.client.Create(ctx, p)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
}

// leaseHolder is the Pod name of the holder of a Lease of charter's
// namespace (controller-runtime's identity is <hostname>_<uuid>), or "".
func leaseHolder(ctx context.Context, name string) string {
	var lease coordinationv1.Lease
	if err := suite.client.Get(ctx, client.ObjectKey{Namespace: charterNamespace, Name: name}, &lease); err != nil {
		return ""
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	holder, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return holder
}

// haReports lists the PolicyReports of the scanned namespace.
func haReports(ctx context.Context) []policyreportv1alpha2.PolicyReport {
	var list policyreportv1alpha2.PolicyReportList
	if err := suite.client.List(ctx, &list, client.InNamespace(haReportsNamespace)); err != nil {
		return nil
	}
	return list.Items
}

// charterWebhookConfigurations names the webhook configurations charter
// wrote (charter-*) that are still there.
func charterWebhookConfigurations(ctx context.Context) []string {
	GinkgoHelper()
	var names []string
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	Expect(suite.client.List(ctx, &validating)).To(Succeed())
	for _, w := range validating.Items {
		if strings.HasPrefix(w.Name, "charter-") {
			names = append(names, w.Name)
		}
	}
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	Expect(suite.client.List(ctx, &mutating)).To(Succeed())
	for _, w := range mutating.Items {
		if strings.HasPrefix(w.Name, "charter-") {
			names = append(names, w.Name)
		}
	}
	return names
}

// deleteNamespaces deletes namespaces and waits until they are gone.
func deleteNamespaces(ctx context.Context, names ...string) {
	GinkgoHelper()
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		Expect(client.IgnoreNotFound(suite.client.Delete(ctx, ns))).To(Succeed())
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := suite.client.Get(ctx, client.ObjectKeyFromObject(ns), ns)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		Expect(err).NotTo(HaveOccurred(), "namespace %s still there", name)
	}
}

// rolledOut reports whether a Deployment's controller has seen its latest
// spec and every replica runs it, ready and available, with no old one left.
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation &&
		d.Status.UpdatedReplicas == want && d.Status.ReadyReplicas == want &&
		d.Status.AvailableReplicas == want && d.Status.Replicas == want
}
