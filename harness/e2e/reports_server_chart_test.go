package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/internal/helmchart"
	"github.com/charter-dev/charter/internal/localpg"
	"github.com/charter-dev/charter/internal/reportsserver"
)

const (
	reportsServerChartNS   = "e2e-reports-server-chart"
	reportsServerChartGone = "e2e-reports-server-chart-gone"
)

// The Helm chart's reports server (reportsServer.enabled): `charter
// reports-server` with the flags of the chart's Deployment, its serving
// certificate from the chart's Secret and the connection string from the
// environment as the Deployment gives it, authenticated as the chart's
// ServiceAccount holding the chart's RBAC only, behind the chart's
// APIServices. It runs on this machine beside the local control plane: an
// ExternalName Service for localhost stands in for the chart's ClusterIP
// Service, no Pod running there.
var _ = Describe("Reports in PostgreSQL, as the Helm chart serves them", Label("reports-server"), Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		skipUnlessReportsServerRuns()
		gvs := takeReportCRDsOut(ctx)
		dsn := startPostgres()
		createNamespaces(ctx, reportsServerChartNS)

		chart, err := helmchart.Render(filepath.Join(suite.root, "charts", "charter"), helmchart.Options{
			Namespace: reportsServerChartNS,
			Values:    map[string]any{"reportsServer": map[string]any{"enabled": true, "dsnSecretRef": map[string]any{"name": "pg"}}},
		})
		Expect(err).NotTo(HaveOccurred())
		var args []string
		var apiServices []*unstructured.Unstructured
		certs := GinkgoT().TempDir()
		for _, u := range chart.Objects {
			if u.GetLabels()["app.kubernetes.io/component"] != "reports-server" {
				continue
			}
			switch u.GetKind() {
			case "ServiceAccount", "ClusterRoleBinding", "RoleBinding":
				createEventually(ctx, suite.client, u)
			case "Secret":
				if u.GetName() != "charter-reports-server-tls" {
					continue
				}
				var tls corev1.Secret
				Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &tls)).To(Succeed())
				for _, file := range []string{"tls.crt", "tls.key"} {
					Expect(os.WriteFile(filepath.Join(certs, file), tls.Data[file], 0o600)).To(Succeed())
				}
			case "Deployment":
				containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				args, _, _ = unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			case "APIService":
				apiServices = append(apiServices, u)
			}
		}
		Expect(args).NotTo(BeEmpty(), "the chart's reports-server Deployment")
		Expect(apiServices).To(HaveLen(len(gvs)))

		By("running charter reports-server as the chart's Deployment does, as its ServiceAccount")
		port := freePort()
		for i, a := range args {
			switch {
			case strings.HasPrefix(a, "--secure-port="):
				args[i] = "--secure-port=" + strconv.Itoa(port)
			case strings.HasPrefix(a, "--tls-cert-file="), strings.HasPrefix(a, "--tls-private-key-file="):
				// The Secret's files, where the Deployment mounts them.
				args[i] = strings.Replace(a, "/etc/charter/tls", certs, 1)
			}
		}
		args = append(args, "--bind-address=127.0.0.1",
			"--kubeconfig="+serviceAccountKubeconfig(ctx, reportsServerChartNS, "charter-reports-server"))
		cmd := exec.Command(suite.charter, args...)
		cmd.Env = append(os.Environ(), reportsserver.DSNEnv+"="+dsn)
		cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
		Expect(cmd.Start()).To(Succeed())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		DeferCleanup(func(SpecContext) { terminate(cmd, exited, 30*time.Second) }, NodeTimeout(time.Minute))

		By("routing the report APIs to it by the chart's APIServices")
		service := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "charter-reports-server", Namespace: reportsServerChartNS},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
				Ports: []corev1.ServicePort{{Name: "https", Port: int32(port)}}},
		}
		createEventually(ctx, suite.client, service)
		for _, u := range apiServices {
			Expect(unstructured.SetNestedField(u.Object, int64(port), "spec", "service", "port")).To(Succeed())
			Expect(suite.client.Create(ctx, u)).To(Succeed(), "APIService %s", u.GetName())
		}
		DeferCleanup(func(ctx SpecContext) { deleteReportAPIServices(ctx, gvs) }, NodeTimeout(time.Minute))
		waitCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		Expect(reportsserver.WaitAvailable(waitCtx, suite.config, gvs)).To(Succeed())
	}, NodeTimeout(8*time.Minute))

	// A user outside system:masters, whose requests the server authorises
	// by a SubjectAccessReview (the chart's system:auth-delegator binding):
	// the administrator's it lets through unasked.
	It("stores, lists and reads back a user's reports, authorised with the chart's RBAC only", func(ctx SpecContext) {
		const user = "e2e-reports-server-chart-writer"
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: reportsServerChartNS},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"wgpolicyk8s.io"}, Resources: []string{"policyreports"}, Verbs: []string{"get", "list", "create"}}}}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: reportsServerChartNS},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
		Expect(suite.client.Create(ctx, role)).To(Succeed())
		Expect(suite.client.Create(ctx, binding)).To(Succeed())
		cfg := rest.CopyConfig(suite.config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		writer, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		rep := chartReport(reportsServerChartNS, "first")
		Eventually(func() error { return writer.Create(ctx, rep) }).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(),
			"creating a PolicyReport as %s (RBAC may take a moment)", user)
		var got policyreportv1alpha2.PolicyReport
		Expect(writer.Get(ctx, client.ObjectKeyFromObject(rep), &got)).To(Succeed())
		Expect(got.Summary.Pass).To(Equal(1))
		var list policyreportv1alpha2.PolicyReportList
		Expect(writer.List(ctx, &list, client.InNamespace(reportsServerChartNS), client.MatchingLabels{"e2e": "reports-server-chart"})).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
	}, SpecTimeout(2*time.Minute))

	It("lets kube-controller-manager delete a namespace holding reports", func(ctx SpecContext) {
		createNamespaces(ctx, reportsServerChartGone)
		Expect(suite.client.Create(ctx, chartReport(reportsServerChartGone, "doomed"))).To(Succeed())
		deleteNamespaces(ctx, reportsServerChartGone)
	}, SpecTimeout(3*time.Minute))
})

// chartReport is a PolicyReport of one passing result.
func chartReport(namespace, name string) *policyreportv1alpha2.PolicyReport {
	return &policyreportv1alpha2.PolicyReport{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"e2e": "reports-server-chart"}},
		Summary:    policyreportv1alpha2.PolicyReportSummary{Pass: 1},
		Results: []policyreportv1alpha2.PolicyReportResult{{
			Policy: "require-labels", Rule: "check-team", Result: "pass", Source: "e2e",
		}},
	}
}

// startPostgres starts a private PostgreSQL server until the spec tree
// ends and returns its connection string.
func startPostgres() string {
	GinkgoHelper()
	dir, err := localpg.TempDir("")
	Expect(err).NotTo(HaveOccurred())
	srv, err := localpg.Start(context.Background(), dir)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(srv.Stop()).To(Succeed())
		Expect(os.RemoveAll(dir)).To(Succeed())
	})
	return srv.DSN()
}
