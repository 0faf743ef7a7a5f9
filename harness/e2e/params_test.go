package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

const (
	paramsNamespace        = "e2e-params"
	paramsCharterNamespace = "e2e-params-charter"
	paramsPolicy           = "e2e-params-max-containers"
)

// paramsMaxContainers enforces a limit on a Pod's containers that a
// ConfigMap holds: a validate.cel rule with a paramKind and a paramRef.
const paramsMaxContainers = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-params-max-containers}
spec:
  validationFailureAction: Enforce
  background: true
  rules:
  - name: max-containers
    match:
      any:
      - resources: {kinds: [Pod], namespaces: [e2e-params]}
    validate:
      cel:
        paramKind: {apiVersion: v1, kind: ConfigMap}
        paramRef: {name: limits, namespace: e2e-params, parameterNotFoundAction: Deny}
        expressions:
        - expression: "object.spec.containers.size() <= int(params.data.maxContainers)"
          messageExpression: "'at most ' + params.data.maxContainers + ' containers'"
`

// The params specs run `charter serve --controllers=admission,reports`
// with a ClusterPolicy whose validate.cel rule reads a ConfigMap param:
// admission enforces the param's value, and an edit of the param changes
// the verdict at admission and, without waiting for a full rescan, in the
// PolicyReport of a Pod that exists already.
var _ = Describe("Params", Label("params"), Ordered, inClusterPriority, func() {
	var (
		cl     client.Client
		limits *corev1.ConfigMap
		single *corev1.Pod
	)
	paramsPod := func(name string, containers int) *corev1.Pod {
		p := newPod(name, nil)
		p.Namespace = paramsNamespace
		for i := 1; i < containers; i++ {
			c := p.Spec.Containers[0]
			c.Name = c.Name + string(rune('a'+i))
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
		return p
	}
	setMax := func(ctx SpecContext, max string) {
		GinkgoHelper()
		Eventually(func() error {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(limits), limits); err != nil {
				return err
			}
			limits.Data["maxContainers"] = max
			return cl.Update(ctx, limits)
		}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		createNamespaces(ctx, paramsNamespace, paramsCharterNamespace)
		limits = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: paramsNamespace}, Data: map[string]string{"maxContainers": "1"}}
		Expect(client.IgnoreAlreadyExists(cl.Create(ctx, limits))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, limits))).To(Succeed()) })
		useCharter(ctx, paramsCharterNamespace, "admission,reports")
		waitPolicyWebhook(ctx)
		installPolicy(ctx, &kyvernov1.ClusterPolicy{}, paramsMaxContainers)
		waitPolicyReady(ctx, paramsPolicy)
		Eventually(func() error {
			return refusedByCharterFor(ctx, paramsPod("probe", 2), paramsPolicy)
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, NodeTimeout(3*time.Minute))

	It("enforces the param's limit at admission", func(ctx SpecContext) {
		err := cl.Create(ctx, paramsPod("two", 2))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("at most 1 containers"))
		single = paramsPod("one", 1)
		Expect(cl.Create(ctx, single)).To(Succeed())
		waitReport(ctx, single, paramsPolicy+"/max-containers=pass")
	}, SpecTimeout(60*time.Second))

	It("follows an edit of the param at admission and in the existing Pod's report", func(ctx SpecContext) {
		Expect(single).NotTo(BeNil(), "the Pod of the spec before")
		setMax(ctx, "0")
		Eventually(func() error {
			return refusedByCharterFor(ctx, paramsPod("one-more", 1), paramsPolicy)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		waitReport(ctx, single, paramsPolicy+"/max-containers=fail")

		setMax(ctx, "2")
		Eventually(func() error {
			return cl.Create(ctx, paramsPod("two", 2), client.DryRunAll)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		waitReport(ctx, single, paramsPolicy+"/max-containers=pass")
	}, SpecTimeout(90*time.Second))
})
