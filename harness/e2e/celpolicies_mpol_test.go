package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

const (
	mpolNamespace        = "e2e-mpol"
	mpolCharterNamespace = "e2e-mpol-charter"
	mpolPolicy           = "e2e-mpol-defaults"
)

// mpolDefaults labels the Pods of its namespace and sets imagePullPolicy
// Always on each container: an ApplyConfiguration, as Kyverno 1.17+ users
// write MutatingPolicies.
const mpolDefaults = `
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: e2e-mpol-defaults}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: e2e-mpol}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >-
        Object{
          metadata: Object.metadata{labels: {"mutated-by": "e2e-mpol-defaults"}},
          spec: Object.spec{containers: object.spec.containers.map(c,
            Object.spec.containers{name: c.name, imagePullPolicy: "Always"})}
        }
`

// The celpolicies MutatingPolicy specs run `charter serve
// --controllers=admission,reports` with a MutatingPolicy installed through the API
// (Ready needs RBACPermissionsGranted: a reports controller that may read
// what the policy matches):
// it becomes Ready and patches the Pods the API server stores.
var _ = Describe("CEL policies: MutatingPolicy", Label("celpolicies"), Ordered, inClusterPriority, func() {
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		createNamespaces(ctx, mpolNamespace, mpolCharterNamespace)
		useCharter(ctx, mpolCharterNamespace, "admission,reports")
		waitPolicyWebhook(ctx)
		installPolicy(ctx, &policiesv1.MutatingPolicy{}, mpolDefaults)
	}, NodeTimeout(3*time.Minute))

	It("marks the MutatingPolicy Ready", func(ctx SpecContext) {
		waitReady(ctx, &policiesv1.MutatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: mpolPolicy}})
	}, SpecTimeout(60*time.Second))

	It("patches a Pod", func(ctx SpecContext) {
		var stored *corev1.Pod
		// The policy is served once its webhook rule is registered: a
		// Pod created before that is stored as sent.
		Eventually(func(g Gomega) {
			pod := newPod("patched", nil)
			pod.Namespace = mpolNamespace
			g.Expect(cl.Create(ctx, pod, client.DryRunAll)).To(Succeed())
			g.Expect(pod.Labels).To(HaveKeyWithValue("mutated-by", mpolPolicy))
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		stored = newPod("patched", nil)
		stored.Namespace = mpolNamespace
		Expect(cl.Create(ctx, stored)).To(Succeed())
		Expect(cl.Get(ctx, client.ObjectKeyFromObject(stored), stored)).To(Succeed())
		Expect(stored.Labels).To(HaveKeyWithValue("mutated-by", mpolPolicy))
		for _, c := range stored.Spec.Containers {
			Expect(c.ImagePullPolicy).To(Equal(corev1.PullAlways), "container %s", c.Name)
		}
	}, SpecTimeout(90*time.Second))

	It("leaves Pods of other namespaces alone", func(ctx SpecContext) {
		pod := newPod("untouched", nil)
		pod.Namespace = mpolCharterNamespace
		Expect(cl.Create(ctx, pod, client.DryRunAll)).To(Succeed())
		Expect(pod.Labels).NotTo(HaveKey("mutated-by"))
	}, SpecTimeout(30*time.Second))
})
