package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// Namespaces of the background specs: charter's own, the platform
// namespace clone sources live in, and the label that makes a namespace a
// trigger of the specs' policies (so that other specs' namespaces are
// left alone).
const (
	backgroundCharterNamespace = "e2e-background-charter"
	backgroundPlatform         = "e2e-background-platform"
	backgroundLabel            = "e2e-background"
)

// The specs' policies: a default-deny NetworkPolicy and a registry Secret
// for every labelled namespace (both synchronized, both for namespaces that
// existed first too), and a label rolled onto every labelled namespace.
const (
	bgDefaultDeny = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-bg-default-deny}
spec:
  rules:
  - name: default-deny
    match: {any: [{resources: {kinds: [Namespace], selector: {matchLabels: {e2e-background: "true"}}}}]}
    generate:
      synchronize: true
      generateExisting: true
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: default-deny
      namespace: "{{ request.object.metadata.name }}"
      data:
        spec:
          podSelector: {}
          policyTypes: [Ingress]
`
	bgCloneSecret = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-bg-registry}
spec:
  rules:
  - name: registry
    match: {any: [{resources: {kinds: [Namespace], selector: {matchLabels: {e2e-background: "true"}}}}]}
    generate:
      synchronize: true
      apiVersion: v1
      kind: Secret
      name: registry
      namespace: "{{ request.object.metadata.name }}"
      clone: {namespace: e2e-background-platform, name: registry}
`
	bgRollLabel = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-bg-roll-label}
spec:
  rules:
  - name: roll
    match: {any: [{resources: {kinds: [Namespace], selector: {matchLabels: {e2e-background: "true"}}}}]}
    mutate:
      mutateExistingOnPolicyUpdate: true
      targets:
      - {apiVersion: v1, kind: Namespace, name: "{{ request.object.metadata.name }}"}
      patchStrategicMerge:
        metadata:
          labels:
            e2e-rolled: "v1"
`
)

// bgCopyConfigMaps generates a copy of every ConfigMap of one namespace,
// named after it: its generated kind is its trigger kind, so without loop
// protection every copy would make a copy of itself.
const bgCopyConfigMaps = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-bg-copy-configmaps}
spec:
  rules:
  - name: copy
    match: {any: [{resources: {kinds: [ConfigMap], namespaces: [e2e-bg-loop]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: "{{ request.object.metadata.name }}-copy"
      namespace: e2e-bg-loop
      data: {data: {copied: "true"}}
`

func bgPolicy(manifest string) *kyvernov1.ClusterPolicy {
	GinkgoHelper()
	var p kyvernov1.ClusterPolicy
	Expect(yaml.UnmarshalStrict([]byte(manifest), &p)).To(Succeed())
	return &p
}

func bgNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{backgroundLabel: "true"}}}
}

var _ = Describe("Background: generate and mutate existing", Label("background"), Ordered, inClusterPriority, func() {
	var (
		cl        client.Client
		charterNS string
	)

	networkPolicy := func(ctx SpecContext, ns string) (*networkingv1.NetworkPolicy, error) {
		var np networkingv1.NetworkPolicy
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default-deny"}, &np)
		return &np, err
	}
	wantNetworkPolicy := func(ctx SpecContext, ns string, types ...networkingv1.PolicyType) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			np, err := networkPolicy(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(np.Spec.PolicyTypes).To(Equal(types))
			g.Expect(np.Labels).To(HaveKeyWithValue("generate.kyverno.io/policy-name", "e2e-bg-default-deny"))
		}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "NetworkPolicy default-deny in %s", ns)
	}
	createPolicy := func(ctx SpecContext, p *kyvernov1.ClusterPolicy) {
		GinkgoHelper()
		// The policy webhook may not answer yet: retry until it does.
		Eventually(func() error { return client.IgnoreAlreadyExists(cl.Create(ctx, p)) }).
			WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
	}

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{backgroundCharterNamespace, backgroundPlatform} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		// A namespace that exists before the policy: generateExisting.
		Expect(client.IgnoreAlreadyExists(cl.Create(ctx, bgNamespace("e2e-bg-existing")))).To(Succeed())
		Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: backgroundPlatform, Name: "registry"},
			StringData: map[string]string{"token": "v1"},
		}))).To(Succeed())
		charterNS = useCharter(ctx, backgroundCharterNamespace, "admission,background")
		createPolicy(ctx, bgPolicy(bgDefaultDeny))
		createPolicy(ctx, bgPolicy(bgCloneSecret))
	}, NodeTimeout(3*time.Minute))

	It("covers a namespace that existed before the policy (generateExisting)", func(ctx SpecContext) {
		wantNetworkPolicy(ctx, "e2e-bg-existing", networkingv1.PolicyTypeIngress)
	}, SpecTimeout(60*time.Second))

	It("gives a new namespace its default-deny NetworkPolicy", func(ctx SpecContext) {
		// The webhook configuration follows the policy a moment later:
		// until it does, a namespace reaches charter through
		// generateExisting only, so wait for the UpdateRequest path.
		Eventually(func(g Gomega) {
			ns := bgNamespace(fmt.Sprintf("e2e-bg-new-%d", time.Now().UnixNano()%100000))
			g.Expect(cl.Create(ctx, ns)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { _ = cl.Delete(ctx, ns) })
			g.Eventually(func() error { _, err := networkPolicy(ctx, ns.Name); return err }).
				WithTimeout(10 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		}).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(cl.Create(ctx, bgNamespace("e2e-bg-new"))).To(Succeed())
		wantNetworkPolicy(ctx, "e2e-bg-new", networkingv1.PolicyTypeIngress)
		Eventually(func(g Gomega) {
			var urs kyvernov2.UpdateRequestList
			g.Expect(cl.List(ctx, &urs, client.InNamespace(charterNS))).To(Succeed())
			g.Expect(urs.Items).To(BeEmpty(), "completed UpdateRequests are removed")
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("restores a NetworkPolicy a user edits or deletes", func(ctx SpecContext) {
		np, err := networkPolicy(ctx, "e2e-bg-new")
		Expect(err).NotTo(HaveOccurred())
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		Expect(cl.Update(ctx, np)).To(Succeed())
		wantNetworkPolicy(ctx, "e2e-bg-new", networkingv1.PolicyTypeIngress)
		np, err = networkPolicy(ctx, "e2e-bg-new")
		Expect(err).NotTo(HaveOccurred())
		Expect(cl.Delete(ctx, np)).To(Succeed())
		wantNetworkPolicy(ctx, "e2e-bg-new", networkingv1.PolicyTypeIngress)
	}, SpecTimeout(60*time.Second))

	It("updates every NetworkPolicy when the policy's data changes", func(ctx SpecContext) {
		Eventually(func() error {
			var p kyvernov1.ClusterPolicy
			if err := cl.Get(ctx, client.ObjectKey{Name: "e2e-bg-default-deny"}, &p); err != nil {
				return err
			}
			p.Spec.Rules[0].Generation.RawData.Raw = []byte(`{"spec":{"podSelector":{},"policyTypes":["Ingress","Egress"]}}`)
			return cl.Update(ctx, &p)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		for _, ns := range []string{"e2e-bg-existing", "e2e-bg-new"} {
			wantNetworkPolicy(ctx, ns, networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)
		}
	}, SpecTimeout(90*time.Second))

	It("refuses an edit of a synchronized generate rule's match, naming the rule and the field", func(ctx SpecContext) {
		var p kyvernov1.ClusterPolicy
		Expect(cl.Get(ctx, client.ObjectKey{Name: "e2e-bg-default-deny"}, &p)).To(Succeed())
		p.Spec.Rules[0].MatchResources.Any[0].ResourceDescription.Selector.MatchLabels = map[string]string{backgroundLabel: "other"}
		err := cl.Update(ctx, &p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`ClusterPolicy "e2e-bg-default-deny": spec.rules[0] (generate rule "default-deny"): changes of immutable fields of a rule spec in a generate rule is disallowed: match changed`))
	}, SpecTimeout(30*time.Second))

	It("clones the registry Secret from the platform namespace and follows its changes", func(ctx SpecContext) {
		token := func(g Gomega) string {
			var s corev1.Secret
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: "e2e-bg-new", Name: "registry"}, &s)).To(Succeed())
			return string(s.Data["token"])
		}
		Eventually(token).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Equal("v1"))
		var src corev1.Secret
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: backgroundPlatform, Name: "registry"}, &src)).To(Succeed())
		src.Data["token"] = []byte("v2")
		Expect(cl.Update(ctx, &src)).To(Succeed())
		Eventually(token).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Equal("v2"))
	}, SpecTimeout(90*time.Second))

	It("removes the downstream objects when the trigger goes", func(ctx SpecContext) {
		Expect(cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-bg-new"}})).To(Succeed())
		// On the local control plane no namespace controller empties the
		// namespace: the NetworkPolicy goes because charter deletes it.
		Eventually(func() bool {
			_, err := networkPolicy(ctx, "e2e-bg-new")
			return apierrors.IsNotFound(err)
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(BeTrue())
		_, err := networkPolicy(ctx, "e2e-bg-existing")
		Expect(err).NotTo(HaveOccurred(), "the other namespace keeps its NetworkPolicy")
	}, SpecTimeout(60*time.Second))

	It("rolls a label across existing namespaces (mutateExistingOnPolicyUpdate)", func(ctx SpecContext) {
		Expect(client.IgnoreAlreadyExists(cl.Create(ctx, bgNamespace("e2e-bg-roll")))).To(Succeed())
		createPolicy(ctx, bgPolicy(bgRollLabel))
		for _, name := range []string{"e2e-bg-existing", "e2e-bg-roll"} {
			Eventually(func(g Gomega) map[string]string {
				var ns corev1.Namespace
				g.Expect(cl.Get(ctx, client.ObjectKey{Name: name}, &ns)).To(Succeed())
				return ns.Labels
			}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(HaveKeyWithValue("e2e-rolled", "v1"), "namespace %s", name)
		}
	}, SpecTimeout(90*time.Second))

	It("does not trigger a rule again with its own writes (loop protection)", func(ctx SpecContext) {
		// charter's writes are told from the test's by its ServiceAccount
		// in the cluster, or, run here as the suite's own user, by their
		// field manager.
		Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-bg-loop"}}))).To(Succeed())
		createPolicy(ctx, bgPolicy(bgCopyConfigMaps))
		var seed string
		Eventually(func(g Gomega) {
			seed = fmt.Sprintf("seed-%d", time.Now().UnixNano()%100000)
			g.Expect(cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-bg-loop", Name: seed}})).To(Succeed())
			g.Eventually(func() error {
				return cl.Get(ctx, client.ObjectKey{Namespace: "e2e-bg-loop", Name: seed + "-copy"}, &corev1.ConfigMap{})
			}).WithTimeout(10 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		}).WithTimeout(60 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) []string {
			var cms corev1.ConfigMapList
			g.Expect(cl.List(ctx, &cms, client.InNamespace("e2e-bg-loop"))).To(Succeed())
			var copies []string
			for _, cm := range cms.Items {
				if strings.HasSuffix(cm.Name, "-copy-copy") {
					copies = append(copies, cm.Name)
				}
			}
			return copies
		}).WithTimeout(5*time.Second).WithPolling(250*time.Millisecond).Should(BeEmpty(), "a copy of a copy: charter's own write triggered its rule")
		// A user's edit of the copy is a request like any other: it
		// triggers the rule (the copy of the copy appears).
		var cm corev1.ConfigMap
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: "e2e-bg-loop", Name: seed + "-copy"}, &cm)).To(Succeed())
		cm.Data = map[string]string{"edited": "by a user"}
		Expect(cl.Update(ctx, &cm)).To(Succeed())
		Eventually(func() error {
			return cl.Get(ctx, client.ObjectKey{Namespace: "e2e-bg-loop", Name: seed + "-copy-copy"}, &corev1.ConfigMap{})
		}).WithTimeout(20*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "the user's edit of the copy triggers the rule")
	}, SpecTimeout(2*time.Minute))
})

// The background controller runs as a user allowed to read ResourceQuotas
// but not to write them; a policy that generates one must say exactly
// what is missing, in the UpdateRequest and in an event on the policy.
const (
	bgQuotaPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-bg-quota}
spec:
  rules:
  - name: quota
    match: {any: [{resources: {kinds: [Namespace], selector: {matchLabels: {e2e-background-quota: "true"}}}}]}
    generate:
      apiVersion: v1
      kind: ResourceQuota
      name: default
      namespace: "{{ request.object.metadata.name }}"
      data: {spec: {hard: {pods: "10"}}}
`
	bgRestrictedUser       = "e2e-background-restricted"
	bgForbiddenNamespace   = "e2e-bg-forbidden-charter"
	bgForbiddenTrigger     = "e2e-bg-quota-trigger"
	bgRestrictedClusterRol = "e2e-background-restricted"
)

var _ = Describe("Background: a forbidden write", Label("background"), Ordered, func() {
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bgForbiddenNamespace}}))).To(Succeed())
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: bgRestrictedClusterRol},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"kyverno.io"}, Resources: []string{"clusterpolicies", "policies", "policyexceptions"}, Verbs: []string{"get", "list", "watch"}},
				// clusterstate loads GlobalContextEntries, as charter-background may.
				{APIGroups: []string{"kyverno.io"}, Resources: []string{"globalcontextentries"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"policies.kyverno.io"}, Resources: []string{"validatingpolicies", "namespacedvalidatingpolicies", "generatingpolicies", "namespacedgeneratingpolicies", "mutatingpolicies", "namespacedmutatingpolicies", "imagevalidatingpolicies", "namespacedimagevalidatingpolicies", "policyexceptions"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"kyverno.io"}, Resources: []string{"updaterequests", "updaterequests/status"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
				{APIGroups: []string{"kyverno.io"}, Resources: []string{"clusterpolicies/status"}, Verbs: []string{"get", "update", "patch"}},
				{APIGroups: []string{""}, Resources: []string{"namespaces", "resourcequotas"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
			},
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: bgRestrictedClusterRol},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: bgRestrictedUser}},
		}
		for _, obj := range []client.Object{role, binding} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, obj))).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, obj))).To(Succeed()) })
		}
		// Admission as the suite's admin; the background controller as the
		// restricted user, on the same namespace's UpdateRequests.
		// charter runs on this machine whatever the cluster: its
		// background controller acts as a restricted user. Admission is
		// not told who that is (--background-service-account=), so it
		// admits the policy as one admitted before the controller's rights
		// were narrowed: this spec is about what the controller says when
		// a write is refused at run time (policy admission's own refusal
		// is webhook/admission TestClusterPolicyWritesNeedTheBackgroundControllersRights).
		startCharterWith(ctx, bgForbiddenNamespace, "admission", "--background-service-account=")
		startCharterAs(ctx, bgForbiddenNamespace, "background", impersonatingKubeconfig(bgRestrictedUser, "system:authenticated"), GinkgoWriter)
		p := bgPolicy(bgQuotaPolicy)
		Eventually(func() error { return client.IgnoreAlreadyExists(cl.Create(ctx, p)) }).
			WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
	}, NodeTimeout(3*time.Minute))

	It("names the verb, group, kind and namespace in the UpdateRequest, an event and the status of the policy", func(ctx SpecContext) {
		// Until the webhook configuration names the policy's kinds, a new
		// namespace makes no UpdateRequest: create triggers until one does.
		Eventually(func(g Gomega) {
			name := fmt.Sprintf("%s-%d", bgForbiddenTrigger, time.Now().UnixNano()%100000)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e-background-quota": "true"}}}
			g.Expect(cl.Create(ctx, ns)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { _ = cl.Delete(ctx, ns) })
			g.Eventually(func(g Gomega) {
				var urs kyvernov2.UpdateRequestList
				g.Expect(cl.List(ctx, &urs, client.InNamespace(bgForbiddenNamespace))).To(Succeed())
				var messages []string
				for _, ur := range urs.Items {
					messages = append(messages, ur.Status.Message)
				}
				g.Expect(messages).To(ContainElement(And(
					ContainSubstring("forbidden"), ContainSubstring("create ResourceQuota"),
					ContainSubstring("group core, resource resourcequotas"), ContainSubstring("in namespace "+name),
					ContainSubstring("rbac.charter.dev/aggregate-to-background"))))
			}).WithTimeout(15 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		}).WithTimeout(90 * time.Second).Should(Succeed())

		// Its retries run out: it stays Failed, and the policy says why.
		Eventually(func(g Gomega) {
			var urs kyvernov2.UpdateRequestList
			g.Expect(cl.List(ctx, &urs, client.InNamespace(bgForbiddenNamespace))).To(Succeed())
			var failed []string
			for _, ur := range urs.Items {
				if ur.Status.State == kyvernov2.Failed {
					failed = append(failed, ur.Status.Message)
				}
			}
			g.Expect(failed).NotTo(BeEmpty())
			var notes []string
			var events eventsv1.EventList
			g.Expect(cl.List(ctx, &events)).To(Succeed())
			for _, ev := range events.Items {
				if ev.Regarding.Name == "e2e-bg-quota" && ev.Reason == "UpdateRequestFailed" {
					notes = append(notes, ev.Note)
				}
			}
			var core corev1.EventList
			g.Expect(cl.List(ctx, &core)).To(Succeed())
			for _, ev := range core.Items {
				if ev.InvolvedObject.Name == "e2e-bg-quota" && ev.Reason == "UpdateRequestFailed" {
					notes = append(notes, ev.Message)
				}
			}
			g.Expect(strings.Join(notes, "\n")).To(ContainSubstring("create ResourceQuota"))
		}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())

		// The policy's status says it too, where kubectl describe and
		// GitOps health checks look.
		Eventually(func(g Gomega) {
			var p kyvernov1.ClusterPolicy
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: "e2e-bg-quota"}, &p)).To(Succeed())
			c := meta.FindStatusCondition(p.Status.Conditions, "Background")
			g.Expect(c).NotTo(BeNil(), "conditions %+v", p.Status.Conditions)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal("Forbidden"))
			g.Expect(c.Message).To(And(ContainSubstring("may not create ResourceQuota (group core, resource resourcequotas) in namespace"),
				ContainSubstring(bgForbiddenTrigger), ContainSubstring("rbac.charter.dev/aggregate-to-background")))
		}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))
})
