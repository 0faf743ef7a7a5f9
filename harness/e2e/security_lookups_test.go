package e2e

import (
	"context"
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
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// The lookups specs (issue #27, "namespaced CEL lookups stay home"): the
// attacker is admin of secLookupsTeam and writes namespaced policies
// there that read what lies outside it and print it in their messages:
// the cluster's ClusterRoleBindings, the platform's GlobalContextEntry,
// another namespace's pull Secret; or create objects elsewhere.
const (
	secLookupsCharterNS = "e2e-sec-lookups-charter"
	secLookupsTeam      = "e2e-sec-lookups-team"
	secLookupsOther     = "e2e-sec-lookups-other"
	secLookupsAttacker  = "e2e-sec-lookups-attacker"
	// secLookupsBinding is the platform's ClusterRoleBinding whose name
	// must reach no message of the attacker's.
	secLookupsBinding = "e2e-sec-lookups-platform-breakglass"
	// secLookupsPrivate is the platform's GlobalContextEntry, not opened
	// to namespaced policies; secLookupsShared is one that is.
	secLookupsPrivate = "e2e-sec-lookups-private"
	secLookupsShared  = "e2e-sec-lookups-shared"
	secLookupsToken   = "platform-s3cret-token"
	secLookupsMirror  = "mirror.example.com"
)

// secLookupsEntries are the platform's GlobalContextEntries: each caches
// the ConfigMaps of charter's namespace labelled for it and projects
// their data.value.
const secLookupsEntries = `
apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata: {name: e2e-sec-lookups-private}
spec:
  kubernetesResource: {version: v1, resource: configmaps, namespace: e2e-sec-lookups-charter}
  projections:
  - {name: values, jmesPath: "[?metadata.labels.entry == 'private'].data.value"}
---
apiVersion: kyverno.io/v2alpha1
kind: GlobalContextEntry
metadata:
  name: e2e-sec-lookups-shared
  labels: {charter.dev/readable-by-namespaced-policies: "true"}
spec:
  kubernetesResource: {version: v1, resource: configmaps, namespace: e2e-sec-lookups-charter}
  projections:
  - {name: values, jmesPath: "[?metadata.labels.entry == 'shared'].data.value"}
`

// secLookupsPolicy is the attacker's NamespacedValidatingPolicy: for a
// probe ConfigMap labelled e2e-sec-lookups=NAME it evaluates EXPR and
// prints the answer in its denial.
const secLookupsPolicy = `
apiVersion: policies.kyverno.io/v1
kind: NamespacedValidatingPolicy
metadata: {name: NAME, namespace: e2e-sec-lookups-team}
spec:
  validationActions: [ACTION]
  evaluation: {admission: {enabled: ADMISSION}}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}]
  matchConditions:
  - name: probe
    expression: "has(object.metadata.labels) && 'e2e-sec-lookups' in object.metadata.labels && object.metadata.labels['e2e-sec-lookups'] == 'NAME'"
  variables:
  - name: answer
    expression: "EXPR"
  validations:
  - expression: "false"
    messageExpression: "'the lookup answered ' + MESSAGE"
`

// secLookupsNVPol fills in secLookupsPolicy.
func secLookupsNVPol(name, action string, admission bool, expr, message string) *policiesv1.NamespacedValidatingPolicy {
	GinkgoHelper()
	adm := "false"
	if admission {
		adm = "true"
	}
	manifest := strings.NewReplacer("NAME", name, "ACTION", action, "ADMISSION", adm, "EXPR", expr, "MESSAGE", message).Replace(secLookupsPolicy)
	p := &policiesv1.NamespacedValidatingPolicy{}
	Expect(yaml.UnmarshalStrict([]byte(manifest), p)).To(Succeed())
	return p
}

// secLookupsProbe is a ConfigMap of the attacker's namespace that the
// policy name evaluates.
func secLookupsProbe(name string, labels map[string]string) *corev1.ConfigMap {
	l := map[string]string{"e2e-sec-lookups": name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secLookupsTeam, Name: "probe-" + name, Labels: l}}
}

// secLookupsListBindings lists ClusterRoleBindings "in" the policy's
// namespace and names them.
const (
	secLookupsListBindings = `resource.List('rbac.authorization.k8s.io/v1', 'clusterrolebindings', object.metadata.namespace)`
	secLookupsBindingNames = `variables.answer.items.map(b, b.metadata.name).join(', ')`
)

// charter runs with the suite admin's rights (as its roles may read
// every ClusterRoleBinding and every namespace's Secrets). Before the
// lookups stayed home, the resource library ignored the namespace of a
// cluster-scoped lookup and listed every binding, every GlobalContextEntry
// answered a namespaced policy, and another namespace's pull Secret was
// accepted.
var _ = Describe("Security: lookups", Label("security"), Ordered, ContinueOnFailure, func() {
	var attacker client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		createNamespaces(ctx, secLookupsCharterNS, secLookupsTeam, secLookupsOther)
		attacker = namespaceAdmin(ctx, secLookupsAttacker, secLookupsTeam, policyWriter(kyvernov1.GroupVersion.Group, "policies"),
			policyWriter(policiesv1.GroupVersion.Group, "namespacedvalidatingpolicies", "namespacedimagevalidatingpolicies"))
		By("the platform's ClusterRoleBinding, ConfigMaps behind its GlobalContextEntries, and another team's pull Secret")
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: secLookupsBinding},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "breakglass"}}}
		for _, obj := range []client.Object{
			binding,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secLookupsCharterNS, Name: "private", Labels: map[string]string{"entry": "private"}},
				Data: map[string]string{"value": secLookupsToken}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secLookupsCharterNS, Name: "shared", Labels: map[string]string{"entry": "shared"}},
				Data: map[string]string{"value": secLookupsMirror}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secLookupsOther, Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}},
		} {
			Expect(client.IgnoreAlreadyExists(suite.client.Create(ctx, obj))).To(Succeed(), "%T %s", obj, obj.GetName())
		}
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, binding))).To(Succeed()) })

		startCharterWith(ctx, secLookupsCharterNS, "admission,reports")
		waitPolicyWebhook(ctx)
		for _, doc := range strings.Split(secLookupsEntries, "\n---\n") {
			installPolicy(ctx, &kyvernov2alpha1.GlobalContextEntry{}, doc)
		}
	}, NodeTimeout(5*time.Minute))

	// denialOf waits until the attacker's probe is denied by policy, and
	// returns the denial.
	denialOf := func(ctx context.Context, policy string, probe *corev1.ConfigMap) string {
		GinkgoHelper()
		var msg string
		Eventually(func() string {
			msg = denial(ctx, attacker, probe)
			return msg
		}).WithTimeout(60*time.Second).WithPolling(time.Second).Should(ContainSubstring(policy), "the policy %s is served", policy)
		return msg
	}

	It("a NamespacedValidatingPolicy cannot list ClusterRoleBindings at admission", func(ctx SpecContext) {
		p := secLookupsNVPol("list-bindings", "Deny", true, secLookupsListBindings, secLookupsBindingNames)
		createEventually(ctx, attacker, p)
		msg := denialOf(ctx, p.Name, secLookupsProbe(p.Name, nil))
		Expect(msg).To(ContainSubstring(`is cluster-scoped: a lookup in namespace "` + secLookupsTeam + `" cannot read it`))
		Expect(msg).NotTo(ContainSubstring(secLookupsBinding))
		Expect(msg).NotTo(ContainSubstring("the lookup answered"))
	}, SpecTimeout(3*time.Minute))

	It("a NamespacedValidatingPolicy cannot list ClusterRoleBindings in a background scan", func(ctx SpecContext) {
		probe := secLookupsProbe("scan-bindings", nil)
		Expect(attacker.Create(ctx, probe)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, probe))).To(Succeed()) })
		p := secLookupsNVPol("scan-bindings", "Audit", false, secLookupsListBindings, secLookupsBindingNames)
		createEventually(ctx, attacker, p)
		var results []policyreportv1alpha2.PolicyReportResult
		Eventually(func(g Gomega) {
			rep, err := reportOf(ctx, probe)
			g.Expect(err).NotTo(HaveOccurred())
			results = nil
			for _, r := range rep.Results {
				if strings.Contains(r.Policy, p.Name) {
					results = append(results, r)
				}
			}
			g.Expect(results).NotTo(BeEmpty(), "report of %s: %+v", probe.Name, rep.Results)
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		// The scan's result says why the lookup failed (an error of the
		// variable its message reads), and names no binding.
		Expect(results).To(HaveEach(And(
			HaveField("Result", BeElementOf(policyreportv1alpha2.StatusError, policyreportv1alpha2.StatusFail)),
			HaveField("Message", ContainSubstring(`is cluster-scoped: a lookup in namespace "`+secLookupsTeam+`" cannot read it`)),
			HaveField("Message", Not(ContainSubstring(secLookupsBinding))),
		)))
	}, SpecTimeout(3*time.Minute))

	It("a namespaced policy reads a GlobalContextEntry only when the entry opts in", func(ctx SpecContext) {
		p := secLookupsNVPol("read-entry", "Deny", true, `globalContext.Get(object.metadata.labels['entry'], 'values')`, `variables.answer.join(', ')`)
		createEventually(ctx, attacker, p)
		By("the platform's entry, without the label: refused, naming the entry and the label")
		msg := denialOf(ctx, p.Name, secLookupsProbe(p.Name, map[string]string{"entry": secLookupsPrivate}))
		Expect(msg).To(ContainSubstring(`global context entry "` + secLookupsPrivate + `" is not readable by namespaced policies (this policy is in namespace "` + secLookupsTeam + `"): only an entry labelled charter.dev/readable-by-namespaced-policies: "true" is`))
		Expect(msg).NotTo(ContainSubstring(secLookupsToken))
		By("the entry labelled readable: read")
		Eventually(func() string {
			return denial(ctx, attacker, secLookupsProbe(p.Name, map[string]string{"entry": secLookupsShared}))
		}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(ContainSubstring("the lookup answered " + secLookupsMirror))
	}, SpecTimeout(3*time.Minute))

	It("a namespaced policy cannot name another namespace's pull Secret", func(ctx SpecContext) {
		borrow := &kyvernov1.Policy{}
		Expect(yaml.UnmarshalStrict([]byte(`
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: borrow-pull-secret, namespace: e2e-sec-lookups-team}
spec:
  validationFailureAction: Enforce
  rules:
  - name: verify
    match: {any: [{resources: {kinds: [Pod]}}]}
    verifyImages:
    - imageReferences: ["registry.example.com/*"]
      imageRegistryCredentials: {secrets: [e2e-sec-lookups-other/regcred]}
      attestors: [{entries: [{keys: {publicKeys: "k"}}]}]
`), borrow)).To(Succeed())
		ivpol := &policiesv1.NamespacedImageValidatingPolicy{}
		Expect(yaml.UnmarshalStrict([]byte(`
apiVersion: policies.kyverno.io/v1
kind: NamespacedImageValidatingPolicy
metadata: {name: borrow-pull-secret, namespace: e2e-sec-lookups-team}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  credentials:
    secrets: [e2e-sec-lookups-other/regcred]
  attestors:
  - name: k
    cosign: {key: {data: "PEM"}}
  validations:
  - expression: "true"
`), ivpol)).To(Succeed())
		for obj, want := range map[client.Object]string{
			borrow: `Policy "e2e-sec-lookups-team/borrow-pull-secret": spec.rules[0].verifyImages[0].imageRegistryCredentials.secrets[0]: a namespaced policy can only use registry secrets of its own namespace "e2e-sec-lookups-team", not e2e-sec-lookups-other/regcred`,
			ivpol:  `spec.credentials.secrets[0]: a namespaced policy can only use registry secrets of its own namespace "e2e-sec-lookups-team", not e2e-sec-lookups-other/regcred`,
		} {
			err := attacker.Create(ctx, obj)
			if err == nil {
				DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, obj))).To(Succeed()) })
			}
			Expect(err).To(MatchError(ContainSubstring(want)), "%T", obj)
		}
	}, SpecTimeout(time.Minute))

	It("a namespaced policy's resource.Post creates nothing outside its namespace", func(ctx SpecContext) {
		p := secLookupsNVPol("post-elsewhere", "Deny", true,
			`resource.Post('v1', 'configmaps', '`+secLookupsOther+`', {'apiVersion': dyn('v1'), 'kind': dyn('ConfigMap'), 'metadata': dyn({'name': 'planted'})})`,
			`variables.answer.metadata.name`)
		createEventually(ctx, attacker, p)
		msg := denialOf(ctx, p.Name, secLookupsProbe(p.Name, nil))
		Expect(msg).To(ContainSubstring(`a namespaced policy creates objects only in its own namespace "` + secLookupsTeam + `"`))
		Expect(msg).NotTo(ContainSubstring("the lookup answered"))
		err := suite.client.Get(ctx, client.ObjectKey{Namespace: secLookupsOther, Name: "planted"}, &corev1.ConfigMap{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ConfigMap %s/planted: %v", secLookupsOther, err)
	}, SpecTimeout(3*time.Minute))
})
