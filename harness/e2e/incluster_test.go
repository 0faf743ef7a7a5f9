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
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/harness/cluster"
	"github.com/charter-dev/charter/harness/install"
)

// Where charter runs for a spec tree. On a cluster whose nodes run Pods,
// with charter's image (make e2e-kind: kind and E2E_CHARTER_IMAGE), it is
// charter installed in the cluster by charts/charter, in namespace
// charterNamespace: its Deployments, the chart's RBAC and flags, webhooks
// through the Service. BeforeSuite installs it, and every spec tree that
// asks for it with useCharter shares it (installing it again, should a
// spec tree before have uninstalled it). Elsewhere (local), and for the
// spec trees that need charter flags of their own, a restricted identity,
// a restart, or to reach something only on this machine (startCharterWith
// and its callers say which), charter serve runs on this machine with URL
// webhooks; since webhook configurations are cluster-wide and named
// charter's, the install is uninstalled first.
//
// Ginkgo runs spec trees of higher SpecPriority first: those that use the
// install (inClusterPriority), then the ha specs, which disturb it and end
// by uninstalling it (haPriority), then the rest. The install survives a
// spec order that mixes them, at the cost of installing again.
const (
	inClusterPriority = SpecPriority(2)
	haPriority        = SpecPriority(1)
	// inClusterRelease is the Helm release of the install.
	inClusterRelease = "charter"
)

// inCluster is the state of the install.
var inCluster struct {
	// helm is the installed release, nil when charter is not installed.
	helm *install.Helm
	// imageLoaded is set once the image is on the nodes.
	imageLoaded bool
}

// inClusterImage is charter's image when charter can run in the suite's
// cluster, with the provider that loads it into the nodes.
func inClusterImage() (string, cluster.ImageLoader, bool) {
	image := os.Getenv(EnvCharterImage)
	loader, ok := suite.provider.(cluster.ImageLoader)
	return image, loader, image != "" && ok
}

// useCharter gives the calling spec tree a charter that runs controllers
// (a comma-separated list, as --controllers) and returns charter's
// namespace, where its UpdateRequests, certificates and trusted
// PolicyExceptions live: the install's (charterNamespace) when charter runs
// in the cluster, or hostNamespace, in which charter serve runs on this
// machine otherwise. The install runs every controller.
func useCharter(ctx context.Context, hostNamespace, controllers string) string {
	GinkgoHelper()
	if _, _, ok := inClusterImage(); !ok {
		startCharterWith(ctx, hostNamespace, controllers)
		return hostNamespace
	}
	installCharter(ctx)
	return charterNamespace
}

// installCharter installs charter with charts/charter unless it is
// installed, and waits until its Deployments are ready and its webhooks
// answer.
func installCharter(ctx context.Context) *install.Helm {
	GinkgoHelper()
	if inCluster.helm != nil {
		return inCluster.helm
	}
	image, loader, ok := inClusterImage()
	Expect(ok).To(BeTrue(), "charter runs in the cluster only from its image (%s) on a cluster whose nodes run Pods", EnvCharterImage)
	if !inCluster.imageLoaded {
		By("loading " + image + " into the nodes")
		archive := filepath.Join(GinkgoT().TempDir(), "charter.tar")
		out, err := exec.CommandContext(ctx, "docker", "save", "-o", archive, image).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "docker save %s: %s", image, out)
		Expect(loader.LoadImageArchive(ctx, archive)).To(Succeed())
		inCluster.imageLoaded = true
	}
	// charter serve on this machine may have kept its certificates in
	// the same namespace: the install starts from none.
	deleteNamespaces(ctx, charterNamespace)

	By("installing charter with charts/charter")
	started := time.Now()
	helm, err := install.NewHelm(suite.provider.KubeconfigPath(), charterNamespace, inClusterRelease, GinkgoWriter.Printf)
	Expect(err).NotTo(HaveOccurred())
	// The chart's CPU requests (100m for each of 11 Pods) leave a 2-core
	// kind node no room for the surge Pod of a rolling upgrade.
	values := install.ImageValues(image)
	for _, controller := range []string{"admissionController", "reportsController", "backgroundController", "cleanupController", "gitsyncController"} {
		values[controller] = map[string]any{"container": map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "10m"}}}}
	}
	Expect(helm.Install(ctx, filepath.Join(suite.root, "charts", "charter"), values, 5*time.Minute)).To(Succeed())
	inCluster.helm = helm
	// The webhook configurations are written by the admission leader a
	// moment after its Pods are ready.
	waitPolicyWebhook(ctx)
	GinkgoWriter.Printf("charter installed in %s in %s\n", charterNamespace, time.Since(started).Round(100*time.Millisecond))
	return helm
}

// uninstallCharter uninstalls charter if it is installed (helm uninstall,
// whose hook removes the webhook configurations) and waits until its
// namespace is gone, so that a charter on this machine has the cluster to
// itself.
func uninstallCharter(ctx context.Context, why string) {
	GinkgoHelper()
	if inCluster.helm == nil {
		return
	}
	By("uninstalling the charter installed in the cluster: " + why)
	Expect(inCluster.helm.Uninstall(3 * time.Minute)).To(Succeed())
	inCluster.helm = nil
	// Whatever the hook did, leave no webhook behind.
	out, err := exec.CommandContext(ctx, suite.charter, "serve", "--cleanup-webhooks",
		"--kubeconfig="+suite.provider.KubeconfigPath(), "--namespace="+charterNamespace).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "charter serve --cleanup-webhooks: %s", out)
	deleteNamespaces(ctx, charterNamespace)
}

// grantCleanup lets charter's cleanup controller delete resources (core
// group) the way config/rbac/README.md tells users to: a ClusterRole labelled
// rbac.charter.dev/aggregate-to-cleanup, which the cluster aggregates into
// charter-cleanup-aggregate. It waits until the controller's ServiceAccount
// in namespace may delete them in target, where the cluster aggregates
// roles (not on the local control plane, whose charter runs as the
// suite's admin anyway).
func grantCleanup(ctx context.Context, namespace, target string, resources ...string) {
	GinkgoHelper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-cleanup-" + strings.Join(resources, "-"),
			Labels: map[string]string{"rbac.charter.dev/aggregate-to-cleanup": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: resources, Verbs: []string{"get", "list", "watch", "delete"}}},
	}
	Expect(client.IgnoreAlreadyExists(suite.client.Create(ctx, role))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, role))).To(Succeed()) })
	if suite.provider.Name() == cluster.LocalProvider {
		return
	}
	for _, r := range resources {
		Eventually(func(g Gomega) {
			review, err := suite.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{
					User:               serviceAccountUser(namespace, "charter-cleanup"),
					Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: target, Verb: "delete", Resource: r},
				},
			}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(review.Status.Allowed).To(BeTrue(), "charter-cleanup may delete %s in %s", r, target)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}
}
