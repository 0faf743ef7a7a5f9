package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// The writes specs (issue #27, "the object written is the object read"):
// a tenant holds namespace-admin rights in secWritesTenantNS and nothing
// else; secWritesVictimNS is another tenant's Namespace, which it tries to
// relabel through charter's background controller, whose role may write
// where no tenant may.
const (
	secWritesCharterNS = "e2e-sec-writes-charter"
	secWritesTenantNS  = "e2e-sec-writes-a"
	secWritesVictimNS  = "e2e-sec-writes-b"
	secWritesTenant    = "e2e-sec-writes-tenant"
	// secWritesLabel is what the attacks try to put on the victim's
	// Namespace (a tenant would switch Pod Security or
	// charter.dev/enforcement off the same way).
	secWritesLabel = "e2e-sec-writes/relabelled"
	// secWritesPlanted is the ClusterRole the generate attack tries to
	// write.
	secWritesPlanted = "e2e-sec-writes-planted"
)

// secWritesRelabelPolicy is the attack of issue #27 as a tenant writes
// it: a mutate-existing rule of its own namespace whose patchesJson6902
// turns its ConfigMap target into the victim's Namespace. It keeps
// metadata.namespace (the API server drops it from a cluster-scoped
// object) and blanks uid and resourceVersion, so that the update is
// unconditional.
const secWritesRelabelPolicy = `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: relabel-namespace, namespace: e2e-sec-writes-a}
spec:
  rules:
  - name: label-ns
    match: {any: [{resources: {kinds: [ConfigMap], names: [trigger-policy]}}]}
    mutate:
      targets:
      - {apiVersion: v1, kind: ConfigMap, name: settings}
      patchesJson6902: |-
        - {op: replace, path: /kind, value: Namespace}
        - {op: replace, path: /metadata/name, value: e2e-sec-writes-b}
        - {op: add, path: /metadata/uid, value: ""}
        - {op: add, path: /metadata/resourceVersion, value: ""}
        - {op: add, path: /metadata/labels, value: {e2e-sec-writes/relabelled: policy}}
`

// secWritesRelabelMPol is the same attack through a
// NamespacedMutatingPolicy's JSONPatch.
const secWritesRelabelMPol = `
apiVersion: policies.kyverno.io/v1
kind: NamespacedMutatingPolicy
metadata: {name: relabel-namespace, namespace: e2e-sec-writes-a}
spec:
  evaluation:
    admission: {enabled: false}
    mutateExisting: {enabled: true}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"]}
  matchConditions:
  - {name: trigger, expression: "object.metadata.name == 'trigger-mpol'"}
  targetMatchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"]}
    objectSelector: {matchLabels: {target: "yes"}}
  # Without them, a target would have to pass matchConditions too.
  targetMatchConditions:
  - {name: settings, expression: "object.metadata.name == 'settings'"}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [JSONPatch{op: "replace", path: "/kind", value: "Namespace"},
         JSONPatch{op: "replace", path: "/metadata/name", value: "e2e-sec-writes-b"},
         JSONPatch{op: "add", path: "/metadata/uid", value: ""},
         JSONPatch{op: "add", path: "/metadata/resourceVersion", value: ""},
         JSONPatch{op: "add", path: "/metadata/labels", value: {"e2e-sec-writes/relabelled": "mpol"}}]
`

// secWritesGenerateKind is a tenant's generate rule that declares a Role
// of its own namespace, whose scope and namespace charter checks, and
// writes in data a kind of the attacker's choice: Kyverno lets data.kind
// win (a ClusterRole, cluster-scoped, granting Namespace patches). KIND is
// the data.kind: literal, or a variable of the trigger.
const secWritesGenerateKind = `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: NAME, namespace: e2e-sec-writes-a}
spec:
  rules:
  - name: another-kind
    match: {any: [{resources: {kinds: [ConfigMap], names: [trigger-generate]}}]}
    generate:
      apiVersion: rbac.authorization.k8s.io/v1
      kind: Role
      name: e2e-sec-writes-planted
      namespace: e2e-sec-writes-a
      data:
        kind: "KIND"
        rules: [{apiGroups: [""], resources: [namespaces], verbs: [patch]}]
`

// secWritesGenerateNamespace is a tenant's generate rule whose namespace
// comes from its trigger: the attacker names another tenant's namespace
// there, which charter can only check when the rule runs.
const secWritesGenerateNamespace = `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: generate-variable-namespace, namespace: e2e-sec-writes-a}
spec:
  rules:
  - name: another-namespace
    match: {any: [{resources: {kinds: [ConfigMap], names: [trigger-generate-ns]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: e2e-sec-writes-planted
      namespace: "{{ request.object.data.namespace }}"
      data:
        data: {by: policy}
`

// secWritesNGPol is a tenant's NamespacedGeneratingPolicy that generates
// OBJECTS with the generator expression APPLY when the ConfigMap TRIGGER
// of its namespace is created.
const secWritesNGPol = `
apiVersion: policies.kyverno.io/v1
kind: NamespacedGeneratingPolicy
metadata: {name: NAME, namespace: e2e-sec-writes-a}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"]}
  matchConditions:
  - {name: trigger, expression: "object.metadata.name == 'TRIGGER'"}
  variables:
  - name: planted
    expression: >-
      OBJECTS
  generate:
  - expression: APPLY
`

// secWritesNGPolAttacks are the NamespacedGeneratingPolicy's attempts to
// write outside its namespace: what generator.Apply is given, the
// refusal charter records on the UpdateRequest ("" when the object is
// written into the policy's own namespace instead), and the object that
// must never exist.
var secWritesNGPolAttacks = []struct {
	name, objects, apply, refusal string
	never                         client.Object
}{{
	name:    "ngpol-other-namespace",
	objects: `[{"apiVersion": dyn("v1"), "kind": dyn("ConfigMap"), "metadata": dyn({"name": "e2e-sec-writes-planted-ngpol"}), "data": dyn({"by": "ngpol"})}]`,
	apply:   `generator.Apply("e2e-sec-writes-b", variables.planted)`,
	refusal: `cross-namespace generation denied: a namespaced policy generates into its own namespace "e2e-sec-writes-a" only, not "e2e-sec-writes-b"`,
	never:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWritesVictimNS, Name: secWritesPlanted + "-ngpol"}},
}, {
	name:    "ngpol-cluster-scoped",
	objects: `[{"apiVersion": dyn("rbac.authorization.k8s.io/v1"), "kind": dyn("ClusterRole"), "metadata": dyn({"name": "e2e-sec-writes-planted"}), "rules": dyn([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]}])}]`,
	apply:   `generator.Apply(variables.planted)`,
	refusal: `ClusterRole e2e-sec-writes-planted is cluster-scoped: a namespaced policy generates only into its own namespace e2e-sec-writes-a`,
	never:   &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: secWritesPlanted}},
}, {
	name:    "ngpol-object-namespace",
	objects: `[{"apiVersion": dyn("v1"), "kind": dyn("ConfigMap"), "metadata": dyn({"name": "e2e-sec-writes-planted-meta", "namespace": "e2e-sec-writes-b"}), "data": dyn({"by": "ngpol"})}]`,
	apply:   `generator.Apply(variables.planted)`,
	never:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWritesVictimNS, Name: secWritesPlanted + "-meta"}},
}}

// createEventually creates obj as cl, retrying while charter's policy
// webhook does not answer yet, and deletes it when the spec tree ends.
//
// AlreadyExists counts as created only when the object found is the one
// an earlier attempt of this call made (a timed-out Create that the API
// server carried out). An object made before this call, or one still being
// deleted, is another spec's: running against it would test that spec's
// object (CI run 3 of 8d7608d judged a Notary spec by the previous spec's
// policy of the same name), so it fails the spec and names the object.
func createEventually(ctx context.Context, cl client.Client, obj client.Object) {
	GinkgoHelper()
	// API timestamps have whole seconds: anything created before the second
	// this call began is not ours.
	began := time.Now().Truncate(time.Second)
	Eventually(func() error {
		err := cl.Create(ctx, obj)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		found := obj.DeepCopyObject().(client.Object)
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(obj), found); err != nil {
			return err
		}
		if found.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%T %s is still being deleted by an earlier spec", obj, obj.GetName())
		}
		if found.GetCreationTimestamp().Time.Before(began) {
			return StopTrying(fmt.Sprintf("%T %s already existed (created %s), before this spec created it: give the spec's object a name of its own",
				obj, client.ObjectKeyFromObject(obj), found.GetCreationTimestamp().UTC().Format(time.RFC3339)))
		}
		return nil
	}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "creating %T %s", obj, obj.GetName())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, obj))).To(Succeed()) })
}

// updateRequestsOf lists the UpdateRequests in namespace whose trigger
// is named trigger, as "state: message".
func updateRequestsOf(ctx context.Context, g Gomega, namespace, trigger string) []string {
	var urs kyvernov2.UpdateRequestList
	g.Expect(suite.client.List(ctx, &urs, client.InNamespace(namespace))).To(Succeed())
	var out []string
	for _, ur := range urs.Items {
		named := ur.Spec.Resource.Name == trigger
		for _, rc := range ur.Spec.RuleContext {
			named = named || rc.Trigger.Name == trigger
		}
		if named {
			out = append(out, string(ur.Status.State)+": "+ur.Status.Message)
		}
	}
	return out
}

// triggerUntilRequested creates the tenant's trigger ConfigMap (again)
// until charter's webhook has made an UpdateRequest of it (until the
// webhooks name the new policy, a trigger makes none), or until landed
// says the attack got through: then the UpdateRequest was carried out and
// deleted at once.
func triggerUntilRequested(ctx context.Context, tenant client.Client, namespace, charterNS string, cm *corev1.ConfigMap, landed func(Gomega) bool) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		_ = tenant.Delete(ctx, cm.DeepCopy())
		g.Expect(tenant.Create(ctx, cm.DeepCopy())).To(Succeed())
		if landed(g) {
			return
		}
		g.Expect(updateRequestsOf(ctx, g, charterNS, cm.Name)).NotTo(BeEmpty(), "no UpdateRequest of %s/%s yet", namespace, cm.Name)
	}).WithTimeout(90 * time.Second).WithPolling(3 * time.Second).Should(Succeed())
}

// updateRequestMessage waits for an UpdateRequest of the trigger whose
// status message holds want, and returns that message.
func updateRequestMessage(ctx context.Context, charterNS, trigger, want string) string {
	GinkgoHelper()
	var msg string
	Eventually(func(g Gomega) {
		seen := updateRequestsOf(ctx, g, charterNS, trigger)
		for _, s := range seen {
			if strings.Contains(s, want) {
				msg = s
			}
		}
		g.Expect(msg).NotTo(BeEmpty(), "UpdateRequests of %s: %q", trigger, seen)
	}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	return msg
}

// charter runs with the suite admin's rights: what it writes for a
// cluster-scoped policy, it may write anywhere, as a background
// controller's role may. The tenant's namespace's charter-policy
// ServiceAccount, which charter acts as for namespaced policies, is the
// namespace's admin: what stops these attacks is the check that the object
// written is the object read, not RBAC. Before it, the relabelling Policy
// labelled the victim's Namespace and the generate rule wrote a
// ClusterRole.
var _ = Describe("Security: writes", Label("security"), Ordered, ContinueOnFailure, func() {
	var cl, tenant client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		createNamespaces(ctx, secWritesCharterNS, secWritesTenantNS, secWritesVictimNS)
		By("making " + secWritesTenant + " the admin of " + secWritesTenantNS + ", who may write policies there")
		tenant = namespaceAdmin(ctx, secWritesTenant, secWritesTenantNS,
			policyWriter(kyvernov1.GroupVersion.Group, "policies"), policyWriter(policiesv1.GroupVersion.Group, "namespacedmutatingpolicies", "namespacedgeneratingpolicies"))
		By("the tenant gives its namespace's " + rightsPolicySA + " all it may: admin")
		grantPolicyServiceAccountAdmin(ctx, tenant, secWritesTenantNS)
		By("checking the tenant may not label the other Namespace itself")
		victim := &corev1.Namespace{}
		Expect(cl.Get(ctx, client.ObjectKey{Name: secWritesVictimNS}, victim)).To(Succeed())
		victim.Labels = map[string]string{secWritesLabel: "by-hand"}
		Expect(apierrors.IsForbidden(tenant.Update(ctx, victim))).To(BeTrue(), "the tenant may label %s itself", secWritesVictimNS)
		Expect(client.IgnoreAlreadyExists(tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: secWritesTenantNS, Name: "settings", Labels: map[string]string{"target": "yes"}}}))).To(Succeed())

		startCharterWith(ctx, secWritesCharterNS, "admission,background")
	}, NodeTimeout(5*time.Minute))

	// relabelled is the victim Namespace's label the attacks set, "" when
	// unlabelled. Each attack sets its own value (policy, mpol), so that
	// one that got through does not fail the next; neverRelabelled checks
	// the Namespace never gets it.
	relabelled := func(ctx context.Context, g Gomega) string {
		ns := &corev1.Namespace{}
		g.Expect(cl.Get(ctx, client.ObjectKey{Name: secWritesVictimNS}, ns)).To(Succeed())
		return ns.Labels[secWritesLabel]
	}
	landedRelabel := func(ctx context.Context, value string) func(Gomega) bool {
		return func(g Gomega) bool { return relabelled(ctx, g) == value }
	}
	neverRelabelled := func(ctx context.Context, value string) {
		GinkgoHelper()
		Consistently(func(g Gomega) string { return relabelled(ctx, g) }).
			WithTimeout(10*time.Second).WithPolling(time.Second).ShouldNot(Equal(value), "Namespace %s was relabelled", secWritesVictimNS)
	}
	plantedClusterRole := func(ctx context.Context) error {
		return cl.Get(ctx, client.ObjectKey{Name: secWritesPlanted}, &rbacv1.ClusterRole{})
	}

	It("a Policy cannot relabel another Namespace", func(ctx SpecContext) {
		var p kyvernov1.Policy
		Expect(yaml.UnmarshalStrict([]byte(secWritesRelabelPolicy), &p)).To(Succeed())
		createEventually(ctx, tenant, &p)
		triggerUntilRequested(ctx, tenant, secWritesTenantNS, secWritesCharterNS,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWritesTenantNS, Name: "trigger-policy"}}, landedRelabel(ctx, "policy"))
		neverRelabelled(ctx, "policy")
		updateRequestMessage(ctx, secWritesCharterNS, "trigger-policy",
			"rule label-ns: the patch changes the target's kind from ConfigMap to Namespace and name from settings to e2e-sec-writes-b; a mutate-existing patch may not change apiVersion, kind, name or namespace")
	}, SpecTimeout(4*time.Minute))

	It("a NamespacedMutatingPolicy cannot relabel another Namespace", func(ctx SpecContext) {
		var p policiesv1.NamespacedMutatingPolicy
		Expect(yaml.UnmarshalStrict([]byte(secWritesRelabelMPol), &p)).To(Succeed())
		createEventually(ctx, tenant, &p)
		triggerUntilRequested(ctx, tenant, secWritesTenantNS, secWritesCharterNS,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWritesTenantNS, Name: "trigger-mpol"}}, landedRelabel(ctx, "mpol"))
		neverRelabelled(ctx, "mpol")
		updateRequestMessage(ctx, secWritesCharterNS, "trigger-mpol",
			"the patch changes the target's kind from ConfigMap to Namespace and name from settings to e2e-sec-writes-b")
	}, SpecTimeout(4*time.Minute))

	It("a Policy's generate rule writes no other kind than it declares", func(ctx SpecContext) {
		By("a literal data.kind: refused when the Policy is written, naming the field")
		var literal kyvernov1.Policy
		Expect(yaml.UnmarshalStrict([]byte(strings.NewReplacer("NAME", "generate-literal-kind", "KIND", "ClusterRole").Replace(secWritesGenerateKind)), &literal)).To(Succeed())
		err := tenant.Create(ctx, &literal)
		if err == nil {
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, &literal))).To(Succeed()) })
		}
		Expect(err).To(MatchError(ContainSubstring(`Policy "e2e-sec-writes-a/generate-literal-kind": spec.rules[0].generate.data.kind: a namespaced policy generates only the kind its rule declares, Role, not ClusterRole`)))

		By("a data.kind from the trigger: the rule fails, nothing is written")
		var variable kyvernov1.Policy
		Expect(yaml.UnmarshalStrict([]byte(strings.NewReplacer("NAME", "generate-variable-kind", "KIND", "{{ request.object.data.kind }}").Replace(secWritesGenerateKind)), &variable)).To(Succeed())
		createEventually(ctx, tenant, &variable)
		triggerUntilRequested(ctx, tenant, secWritesTenantNS, secWritesCharterNS,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWritesTenantNS, Name: "trigger-generate"}, Data: map[string]string{"kind": "ClusterRole"}},
			func(Gomega) bool { return plantedClusterRole(ctx) == nil })
		Consistently(func(g Gomega) {
			err := plantedClusterRole(ctx)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ClusterRole %s: %v", secWritesPlanted, err)
		}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
		updateRequestMessage(ctx, secWritesCharterNS, "trigger-generate",
			"rule another-kind: /generate/data/kind changes the generated object's kind from Role to ClusterRole; a namespaced policy generates only the apiVersion, kind, name and namespace its rule declares")
	}, SpecTimeout(4*time.Minute))

	It("a Policy's generate rule writes into no other namespace than its own", func(ctx SpecContext) {
		var p kyvernov1.Policy
		Expect(yaml.UnmarshalStrict([]byte(secWritesGenerateNamespace), &p)).To(Succeed())
		createEventually(ctx, tenant, &p)
		planted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWritesVictimNS, Name: secWritesPlanted}}
		triggerUntilRequested(ctx, tenant, secWritesTenantNS, secWritesCharterNS,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWritesTenantNS, Name: "trigger-generate-ns"}, Data: map[string]string{"namespace": secWritesVictimNS}},
			func(Gomega) bool { return cl.Get(ctx, client.ObjectKeyFromObject(planted), planted) == nil })
		neverWritten(ctx, planted)
		updateRequestMessage(ctx, secWritesCharterNS, "trigger-generate-ns",
			`rule another-namespace: failed to generate resources: a namespaced policy can only generate into its own namespace "e2e-sec-writes-a", not "e2e-sec-writes-b"`)
	}, SpecTimeout(4*time.Minute))

	It("a NamespacedGeneratingPolicy writes into no other namespace, and no cluster-scoped object", func(ctx SpecContext) {
		for _, attack := range secWritesNGPolAttacks {
			By(attack.name + ": " + attack.apply)
			var p policiesv1.NamespacedGeneratingPolicy
			manifest := strings.NewReplacer("NAME", attack.name, "TRIGGER", "trigger-"+attack.name, "OBJECTS", attack.objects, "APPLY", attack.apply).Replace(secWritesNGPol)
			Expect(yaml.UnmarshalStrict([]byte(manifest), &p)).To(Succeed())
			createEventually(ctx, tenant, &p)
			trigger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWritesTenantNS, Name: "trigger-" + attack.name}}
			exists := func(obj client.Object) bool {
				return cl.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)) == nil
			}
			// Where charter writes the object into the policy's own
			// namespace, the UpdateRequest is gone at once.
			home := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWritesTenantNS, Name: attack.never.GetName()}}
			triggerUntilRequested(ctx, tenant, secWritesTenantNS, secWritesCharterNS, trigger,
				func(Gomega) bool { return exists(attack.never) || (attack.refusal == "" && exists(home)) })
			if attack.refusal != "" {
				updateRequestMessage(ctx, secWritesCharterNS, trigger.Name, attack.refusal)
			} else {
				By("the object is written into the policy's own namespace instead")
				Eventually(func() bool { return exists(home) }).WithTimeout(90*time.Second).WithPolling(time.Second).Should(BeTrue(), "%s/%s", home.Namespace, home.Name)
			}
			neverWritten(ctx, attack.never)
		}
	}, SpecTimeout(8*time.Minute))
})

// neverWritten checks, for a while, that obj does not exist.
func neverWritten(ctx context.Context, obj client.Object) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		err := suite.client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
}
