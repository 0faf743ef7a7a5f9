package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
)

const (
	gctxNamespace        = "e2e-gctx"
	gctxCharterNamespace = "e2e-gctx-charter"
	gctxPolicy           = "e2e-gctx-registries"
)

// gctxRegistries caches the ConfigMaps of e2e-gctx: each one's data.host
// is an allowed registry.
const gctxRegistries = `
apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata: {name: e2e-gctx-registries}
spec:
  kubernetesResource: {version: v1, resource: configmaps, namespace: e2e-gctx}
  projections:
  - {name: hosts, jmesPath: "[?data.host].data.host"}
`

// gctxRegistriesPolicy denies Pods of e2e-gctx whose image's registry
// the entry's projection does not list.
const gctxRegistriesPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-gctx-registries}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: known-registry
    match:
      any:
      - resources: {kinds: [Pod], namespaces: [e2e-gctx]}
    context:
    - name: hosts
      globalReference: {name: e2e-gctx-registries.hosts}
    validate:
      message: "{{ request.object.spec.containers[0].image }} is not from an allowed registry"
      deny:
        conditions:
          all:
          - key: "{{ split(request.object.spec.containers[0].image, '/')[0] }}"
            operator: AnyNotIn
            value: "{{ hosts }}"
`

// gctxBlocked calls loopback, which charter's default
// --cel-http-blocklist refuses.
const gctxBlocked = `
apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata: {name: e2e-gctx-blocked}
spec:
  apiCall:
    service: {url: "http://127.0.0.1:1/registries"}
    retryLimit: 1
`

// The GlobalContext specs run `charter serve --controllers=admission`
// with a GlobalContextEntry caching ConfigMaps and a ClusterPolicy that
// reads it through globalReference: the entry's status says it is Ready,
// admission follows the ConfigMaps as they change, and an entry charter
// may not call is Ready=False naming why.
var _ = Describe("GlobalContext", Label("globalcontext"), Ordered, inClusterPriority, func() {
	var cl client.Client
	pod := func(name, image string) *corev1.Pod {
		p := newPod(name, nil)
		p.Namespace, p.Spec.Containers[0].Image = gctxNamespace, image
		return p
	}
	registry := func(name, host string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gctxNamespace}, Data: map[string]string{"host": host}}
	}
	createEntry := func(ctx SpecContext, manifest string) *kyvernov2alpha1.GlobalContextEntry {
		GinkgoHelper()
		gce := &kyvernov2alpha1.GlobalContextEntry{}
		Expect(yaml.UnmarshalStrict([]byte(manifest), gce)).To(Succeed())
		Eventually(func() error { return client.IgnoreAlreadyExists(cl.Create(ctx, gce.DeepCopy())) }).
			WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, gce))).To(Succeed()) })
		return gce
	}
	readyCondition := func(ctx SpecContext, name string) func() *metav1.Condition {
		return func() *metav1.Condition {
			gce := &kyvernov2alpha1.GlobalContextEntry{}
			if err := cl.Get(ctx, client.ObjectKey{Name: name}, gce); err != nil || gce.Status.ObservedGeneration != gce.Generation {
				return nil
			}
			return apimeta.FindStatusCondition(gce.Status.Conditions, kyvernov2alpha1.ConditionReady)
		}
	}

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		createNamespaces(ctx, gctxNamespace, gctxCharterNamespace)
		ghcr := registry("ghcr", "ghcr.io")
		Expect(client.IgnoreAlreadyExists(cl.Create(ctx, ghcr))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, ghcr))).To(Succeed()) })
		useCharter(ctx, gctxCharterNamespace, "admission")
		waitPolicyWebhook(ctx)
		createEntry(ctx, gctxRegistries)
		installPolicy(ctx, &kyvernov1.ClusterPolicy{}, gctxRegistriesPolicy)
		waitPolicyReady(ctx, gctxPolicy)
	}, NodeTimeout(3*time.Minute))

	It("reports the entry Ready once its informer has synced", func(ctx SpecContext) {
		Eventually(readyCondition(ctx, "e2e-gctx-registries")).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(And(
			Not(BeNil()), HaveField("Status", metav1.ConditionTrue), HaveField("Message", "watching configmaps of namespace e2e-gctx")))
	}, SpecTimeout(90*time.Second))

	It("denies a registry the entry does not list, and follows its ConfigMaps", func(ctx SpecContext) {
		Eventually(func() error {
			return refusedByCharterFor(ctx, pod("from-dockerhub", "docker.io/library/nginx:1.27"), gctxPolicy)
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(cl.Create(ctx, pod("from-ghcr", "ghcr.io/team/app:1"), client.DryRunAll)).To(Succeed())

		dockerhub := registry("dockerhub", "docker.io")
		Expect(cl.Create(ctx, dockerhub)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, dockerhub))).To(Succeed()) })
		Eventually(func() error {
			return cl.Create(ctx, pod("from-dockerhub", "docker.io/library/nginx:1.27"), client.DryRunAll)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("shows an entry charter may not call Ready=False, naming the blocklist", func(ctx SpecContext) {
		createEntry(ctx, gctxBlocked)
		Eventually(readyCondition(ctx, "e2e-gctx-blocked")).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(And(
			Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Reason", kyvernov2alpha1.ReasonAPICallFailed),
			HaveField("Message", ContainSubstring("address 127.0.0.1 is blocked (--cel-http-blocklist"))))
	}, SpecTimeout(90*time.Second))
})
