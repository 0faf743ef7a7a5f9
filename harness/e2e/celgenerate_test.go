package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

const (
	celGenCharterNamespace = "e2e-celgen-charter"
	celGenLabel            = "e2e-celgen"
	celGenExisting         = "e2e-celgen-existing"
	celDelNamespace        = "e2e-celdel"
)

// celGenNetworkPolicy gives every namespace labelled e2e-celgen=true a
// default-deny NetworkPolicy, for namespaces that exist and new ones,
// kept in sync; celDeleteConfigMaps deletes the ConfigMaps of e2e-celdel
// labelled expire=now every two seconds.
const (
	celGenNetworkPolicy = `
apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: e2e-gpol-default-deny}
spec:
  evaluation:
    generateExisting: {enabled: true}
    synchronize: {enabled: true}
  matchConstraints:
    objectSelector: {matchLabels: {e2e-celgen: "true"}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [namespaces]}
  variables:
  - name: netpol
    expression: >-
      {"apiVersion": dyn("networking.k8s.io/v1"), "kind": dyn("NetworkPolicy"),
       "metadata": dyn({"name": "gpol-default-deny"}),
       "spec": dyn({"podSelector": dyn({}), "policyTypes": dyn(["Ingress", "Egress"])})}
  generate:
  - expression: generator.Apply(object.metadata.name, [variables.netpol])
`
	celDeleteConfigMaps = `
apiVersion: policies.kyverno.io/v1
kind: DeletingPolicy
metadata: {name: e2e-dpol-expired}
spec:
  schedule: "*/2 * * * * *"
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: e2e-celdel}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [configmaps]}
  conditions:
  - name: expired
    expression: "object.metadata.?labels.?expire.orValue('') == 'now'"
`
)

// celMutateExisting are MutatingPolicies with evaluation.mutateExisting:
// a ConfigMap of e2e-mpolx-a labelled trigger=yes rolls rolled=v2 onto every
// ConfigMap labelled e2e-mpolx=roll, in any namespace; an update of a
// Namespace labelled e2e-mpolx=ns labels all such Namespaces privileged
// (Kyverno's add-privileged-existing-namespaces: no target spec).
const celMutateExisting = `
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: e2e-mpolx-configmaps}
spec:
  evaluation:
    admission: {enabled: false}
    mutateExisting: {enabled: true}
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: e2e-mpolx-a}}
    objectSelector: {matchLabels: {trigger: "yes"}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  targetMatchConstraints:
    objectSelector: {matchLabels: {e2e-mpolx: roll}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [configmaps]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'rolled': 'v2'}}}"
---
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: e2e-mpolx-namespaces}
spec:
  evaluation:
    mutateExisting: {enabled: true}
  matchConstraints:
    objectSelector: {matchLabels: {e2e-mpolx: ns}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [namespaces]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("pod-security.kubernetes.io/enforce"), value: "privileged"}]
`

// The celpolicies generate, mutate-existing and delete specs run `charter
// serve --controllers=admission,reports,background,cleanup` with a
// GeneratingPolicy, MutatingPolicies and a DeletingPolicy installed
// through the API.
var _ = Describe("CEL policies: GeneratingPolicy, MutatingPolicy mutateExisting and DeletingPolicy", Label("celpolicies"), Ordered, inClusterPriority, func() {
	var cl client.Client

	netpol := func(ctx SpecContext, ns string) error {
		var np networkingv1.NetworkPolicy
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpol-default-deny"}, &np); err != nil {
			return err
		}
		if np.Labels["generate.kyverno.io/policy-name"] != "e2e-gpol-default-deny" || len(np.Spec.PolicyTypes) != 2 {
			return fmt.Errorf("NetworkPolicy %s/gpol-default-deny: labels %v, policyTypes %v", ns, np.Labels, np.Spec.PolicyTypes)
		}
		return nil
	}
	create := func(ctx SpecContext, obj client.Object) {
		GinkgoHelper()
		// The policy webhook may not answer yet: retry until it does.
		Eventually(func() error { return client.IgnoreAlreadyExists(cl.Create(ctx, obj)) }).
			WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, obj))).To(Succeed()) })
	}

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: celGenCharterNamespace}},
			{ObjectMeta: metav1.ObjectMeta{Name: celDelNamespace}},
			{ObjectMeta: metav1.ObjectMeta{Name: celGenExisting, Labels: map[string]string{celGenLabel: "true"}}},
		} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, ns))).To(Succeed())
		}
		charterNS := useCharter(ctx, celGenCharterNamespace, "admission,reports,background,cleanup")
		waitPolicyWebhook(ctx)
		// What the DeletingPolicy deletes, the cleanup controller must be
		// allowed to, as config/rbac/README.md tells users to grant it.
		grantCleanup(ctx, charterNS, celDelNamespace, "configmaps")
	}, NodeTimeout(3*time.Minute))

	It("a GeneratingPolicy creates a NetworkPolicy per namespace", func(ctx SpecContext) {
		var p policiesv1.GeneratingPolicy
		Expect(yaml.UnmarshalStrict([]byte(celGenNetworkPolicy), &p)).To(Succeed())
		create(ctx, &p)
		Eventually(func() error { return netpol(ctx, celGenExisting) }).
			WithTimeout(60*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "generateExisting: the namespace that was there")
		// The namespace's report names what the policy generated for it.
		var existing corev1.Namespace
		Expect(cl.Get(ctx, client.ObjectKey{Name: celGenExisting}, &existing)).To(Succeed())
		Eventually(func(g Gomega) {
			var rep policyreportv1alpha2.ClusterPolicyReport
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: string(existing.UID)}, &rep)).To(Succeed())
			g.Expect(rep.Results).To(ContainElement(And(
				HaveField("Source", "KyvernoGeneratingPolicy"),
				HaveField("Policy", p.Name),
				HaveField("Rule", p.Name),
				HaveField("Result", policyreportv1alpha2.PolicyResult("pass")),
				HaveField("Properties", HaveKeyWithValue("generated-resources", "networking.k8s.io/v1, Kind=NetworkPolicy Name=gpol-default-deny Namespace="+celGenExisting)),
			)))
		}).WithTimeout(60*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "the namespace's report: generated-resources")

		// A new namespace reaches charter through its webhook once the
		// webhook configuration follows the policy.
		Eventually(func(g Gomega) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e2e-celgen-new-%d", time.Now().UnixNano()%100000), Labels: map[string]string{celGenLabel: "true"}}}
			g.Expect(cl.Create(ctx, ns)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { _ = cl.Delete(ctx, ns) })
			g.Eventually(func() error { return netpol(ctx, ns.Name) }).WithTimeout(10 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		}).WithTimeout(90 * time.Second).Should(Succeed())

		// Synchronize: a deleted NetworkPolicy comes back.
		var np networkingv1.NetworkPolicy
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: celGenExisting, Name: "gpol-default-deny"}, &np)).To(Succeed())
		Expect(cl.Delete(ctx, &np)).To(Succeed())
		Eventually(func() error { return netpol(ctx, celGenExisting) }).
			WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "the deleted NetworkPolicy restored")

		Eventually(func(g Gomega) {
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: p.Name}, &p)).To(Succeed())
			g.Expect(policiesv1.ReadyAt(&p)).To(BeTrue(), "conditionStatus %+v at generation %d", p.Status.ConditionStatus, p.Generation)
		}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "GeneratingPolicy Ready")
	}, SpecTimeout(4*time.Minute))

	It("a MutatingPolicy with mutateExisting rolls a label across existing ConfigMaps and Namespaces", func(ctx SpecContext) {
		for _, ns := range []string{"e2e-mpolx-a", "e2e-mpolx-b"} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"e2e-mpolx": "ns"}}}))).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { _ = cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
			Expect(cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{"e2e-mpolx": "roll"}}})).To(Succeed())
		}
		Expect(cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-mpolx-b", Name: "unselected"}})).To(Succeed())
		for _, doc := range strings.Split(celMutateExisting, "\n---\n") {
			var p policiesv1.MutatingPolicy
			Expect(yaml.UnmarshalStrict([]byte(doc), &p)).To(Succeed())
			create(ctx, &p)
		}
		labels := func(g Gomega, obj client.Object) map[string]string {
			g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			return obj.GetLabels()
		}
		// Admission makes the UpdateRequests once the webhook
		// configuration follows the policies: trigger until it does.
		Eventually(func(g Gomega) {
			trigger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-mpolx-a", GenerateName: "trigger-", Labels: map[string]string{"trigger": "yes"}}}
			g.Expect(cl.Create(ctx, trigger)).To(Succeed())
			for _, ns := range []string{"e2e-mpolx-a", "e2e-mpolx-b"} {
				g.Eventually(func(g Gomega) map[string]string {
					return labels(g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}})
				}).WithTimeout(10*time.Second).WithPolling(250*time.Millisecond).Should(HaveKeyWithValue("rolled", "v2"), "ConfigMap %s/settings", ns)
			}
		}).WithTimeout(90 * time.Second).Should(Succeed())
		Expect(labels(Default, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-mpolx-b", Name: "unselected"}})).NotTo(HaveKey("rolled"))

		Eventually(func(g Gomega) {
			var ns corev1.Namespace
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: "e2e-mpolx-a"}, &ns)).To(Succeed())
			ns.Labels["touched"] = time.Now().Format("150405.000")
			g.Expect(cl.Update(ctx, &ns)).To(Succeed())
			for _, name := range []string{"e2e-mpolx-a", "e2e-mpolx-b"} {
				g.Eventually(func(g Gomega) map[string]string {
					return labels(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
				}).WithTimeout(10*time.Second).WithPolling(250*time.Millisecond).Should(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "privileged"), "Namespace %s", name)
			}
		}).WithTimeout(90 * time.Second).Should(Succeed())
		Expect(labels(Default, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: celGenCharterNamespace}})).NotTo(HaveKey("pod-security.kubernetes.io/enforce"))
	}, SpecTimeout(4*time.Minute))

	It("a DeletingPolicy deletes on schedule", func(ctx SpecContext) {
		expired := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: celDelNamespace, Name: "expired", Labels: map[string]string{"expire": "now"}}}
		kept := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: celDelNamespace, Name: "kept", Labels: map[string]string{"expire": "never"}}}
		elsewhere := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: celGenCharterNamespace, Name: "elsewhere", Labels: map[string]string{"expire": "now"}}}
		for _, cm := range []*corev1.ConfigMap{expired, kept, elsewhere} {
			Expect(cl.Create(ctx, cm)).To(Succeed())
		}
		var p policiesv1.DeletingPolicy
		Expect(yaml.UnmarshalStrict([]byte(celDeleteConfigMaps), &p)).To(Succeed())
		create(ctx, &p)
		Eventually(func() bool {
			return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKeyFromObject(expired), &corev1.ConfigMap{}))
		}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(BeTrue(), "the expired ConfigMap deleted")
		for _, cm := range []*corev1.ConfigMap{kept, elsewhere} {
			Expect(cl.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed(), "%s/%s kept", cm.Namespace, cm.Name)
		}
		Eventually(func(g Gomega) {
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: p.Name}, &p)).To(Succeed())
			g.Expect(p.Status.LastExecutionTime).NotTo(BeNil())
			g.Expect(p.Status.ConditionStatus.ReadyAt(p.Generation)).To(BeTrue(), "conditionStatus %+v", p.Status.ConditionStatus)
		}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "DeletingPolicy status")
	}, SpecTimeout(2*time.Minute))

	It("refuses a DeletingPolicy whose schedule does not parse, naming the field", func(ctx SpecContext) {
		var p policiesv1.DeletingPolicy
		Expect(yaml.UnmarshalStrict([]byte(celDeleteConfigMaps), &p)).To(Succeed())
		p.Name, p.Spec.Schedule = "e2e-dpol-broken", "61 * * * *"
		err := cl.Create(ctx, &p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.schedule"))
	}, SpecTimeout(30*time.Second))
})
