package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

const (
	celNamespace        = "e2e-celpolicies"
	celCharterNamespace = "e2e-celpolicies-charter"
	celDenyPolicy       = "e2e-vpol-no-latest"
	celAuditPolicy      = "e2e-vpol-owner"
)

// celDenyLatest denies Pods with a :latest image; celAuditOwner audits
// Pods without an owner label. Both are policies.kyverno.io/v1
// ValidatingPolicies, as Kyverno 1.17+ users write them.
const (
	celDenyLatest = `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: e2e-vpol-no-latest}
spec:
  validationActions: [Deny]
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: e2e-celpolicies}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  validations:
  - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
    messageExpression: "'Pod ' + object.metadata.name + ' uses a :latest image'"
`
	celAuditOwner = `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata:
  name: e2e-vpol-owner
  annotations: {policies.kyverno.io/category: Best Practices}
spec:
  validationActions: [Audit]
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: e2e-celpolicies}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  validations:
  - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
    message: label 'owner' is required
`
)

// The celpolicies specs run `charter serve --controllers=admission,reports`
// with ValidatingPolicies installed through the API: Deny refuses at
// admission with the validation's message, Audit admits and reports the
// failure, and each policy's status says Ready.
var _ = Describe("CEL policies", Label("celpolicies"), Ordered, inClusterPriority, func() {
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		createNamespaces(ctx, celNamespace, celCharterNamespace)
		useCharter(ctx, celCharterNamespace, "admission,reports")
		waitPolicyWebhook(ctx)
		for _, manifest := range []string{celDenyLatest, celAuditOwner} {
			installPolicy(ctx, &policiesv1.ValidatingPolicy{}, manifest)
		}
		// Wait until the Deny policy is served.
		Eventually(func() error {
			return refusedByCharter(ctx, celPod("probe", "nginx:latest", nil))
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, NodeTimeout(3*time.Minute))

	It("denies a bad Pod with the validation's message", func(ctx SpecContext) {
		err := cl.Create(ctx, celPod("bad", "nginx:latest", map[string]string{"owner": "team-a"}))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("Pod bad uses a :latest image"))
	}, SpecTimeout(30*time.Second))

	It("admits a Pod that fails the Audit policy and reports the failure", func(ctx SpecContext) {
		pod := celPod("unowned", "nginx:1.27", nil)
		Expect(cl.Create(ctx, pod)).To(Succeed())
		rep := waitReport(ctx, pod, celDenyPolicy+"/=pass", celAuditPolicy+"/=fail")
		Expect(rep.Results).To(ContainElement(And(
			HaveField("Policy", celAuditPolicy),
			HaveField("Source", "KyvernoValidatingPolicy"),
			HaveField("Category", "Best Practices"),
			HaveField("Message", "label 'owner' is required"),
			HaveField("Properties", HaveKeyWithValue("cel.validationIndex", "0")),
		)))
	}, SpecTimeout(60*time.Second))

	It("marks both policies Ready", func(ctx SpecContext) {
		for _, name := range []string{celDenyPolicy, celAuditPolicy} {
			waitReady(ctx, &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	}, SpecTimeout(60*time.Second))

	It("refuses a ValidatingPolicy that does not compile, naming the field", func(ctx SpecContext) {
		var p policiesv1.ValidatingPolicy
		Expect(yaml.UnmarshalStrict([]byte(celAuditOwner), &p)).To(Succeed())
		p.Name = "e2e-vpol-broken"
		p.Spec.Validations[0].Expression = "object.metadata.name"
		err := cl.Create(ctx, &p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.validations[0].expression"))
	}, SpecTimeout(30*time.Second))
})

// celPod is a Pod of the celpolicies specs' namespace.
func celPod(name, image string, labels map[string]string) *corev1.Pod {
	p := newPod(name, labels)
	p.Namespace = celNamespace
	p.Spec.Containers[0].Image = image
	return p
}

// createNamespaces creates the namespaces a spec tree uses, if missing,
// and waits for their default ServiceAccounts.
func createNamespaces(ctx context.Context, names ...string) {
	GinkgoHelper()
	for _, ns := range names {
		Expect(client.IgnoreAlreadyExists(suite.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	}
	waitDefaultServiceAccounts(ctx, names...)
}

// installPolicy decodes manifest strictly into obj and creates it,
// retrying while charter's policy webhook does not answer yet; the spec
// tree's cleanup deletes it.
func installPolicy(ctx context.Context, obj client.Object, manifest string) {
	GinkgoHelper()
	Expect(yaml.UnmarshalStrict([]byte(manifest), obj)).To(Succeed())
	Eventually(func() error { return client.IgnoreAlreadyExists(suite.client.Create(ctx, obj)) }).
		WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, obj))).To(Succeed()) })
}
