package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/webhook/config"
)

// celConditionedPolicies are CEL policies whose spec.matchConditions the
// API server can evaluate, or cannot, all scoped to namespace cel-mc:
//   - divide and divide-open: a condition that errs (2 / 0), under
//     failurePolicy Fail and Ignore, on ConfigMaps; as in Kyverno's
//     chainsaw tests validating-policies/match-conditions/failure-policy;
//   - a ClusterPolicy also named divide, with webhook matchConditions, on
//     Secrets: its own webhook, beside the ValidatingPolicy's;
//   - corp-images: a Pod policy with autogen copies, whose condition
//     reads the Pod's containers (it errs on a Deployment);
//   - corp-registry: a condition calling Kyverno's image() library,
//     which the API server does not have;
//   - tiered: a condition reading namespaceObject, which the API server
//     binds to null for a webhook.
const celConditionedPolicies = `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: divide}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: cel-mc}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  matchConditions:
  - {name: error, expression: "2 / 0 == 1"}
  validations:
  - {expression: "false", message: "always false"}
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: divide-open}
spec:
  failurePolicy: Ignore
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: cel-mc}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [serviceaccounts]}
  matchConditions:
  - {name: error, expression: "2 / 0 == 1"}
  validations:
  - {expression: "false", message: "always false"}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: divide
spec:
  validationFailureAction: Enforce
  background: false
  webhookConfiguration:
    matchConditions:
    - name: locked
      expression: "object != null && has(object.metadata.labels) && 'locked' in object.metadata.labels"
  rules:
  - name: no-locked-secrets
    match: {any: [{resources: {kinds: [Secret], namespaces: [cel-mc]}}]}
    validate:
      message: "locked Secrets are refused"
      deny: {}
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: corp-images}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: cel-mc}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  matchConditions:
  - {name: corp, expression: "object.spec.containers.exists(c, c.image.startsWith('corp/'))"}
  validations:
  - {expression: "object.metadata.?labels.?owner.orValue('') != ''", message: "corp Pods need an owner"}
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: corp-registry}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: cel-mc}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  matchConditions:
  - {name: corp-registry, expression: "object.spec.containers.exists(c, image(c.image).registry() == 'corp.reg.com')"}
  validations:
  - {expression: "object.metadata.?labels.?signed.orValue('') == 'yes'", message: "corp.reg.com Pods must be signed"}
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: tiered}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [services]}
  matchConditions:
  - {name: tier-x, expression: "namespaceObject.metadata.?labels.?tier.orValue('') == 'x'"}
  validations:
  - {expression: "false", message: "no Services in tier x"}
`

// TestCELMatchConditionsOnRealAPIServer: a CEL policy's matchConditions
// that the API server can evaluate go into a webhook of the policy's own,
// as Kyverno's do, so the API server answers a condition that errs with
// its own message under the policy's failurePolicy (Kyverno's e2e tests
// expect "expression '2 / 0 == 1' resulted in error: division by zero");
// the conditions it cannot evaluate stay with charter's engine, and a Pod
// policy's conditions never refuse the Pod controllers its autogen
// copies match.
func TestCELMatchConditionsOnRealAPIServer(t *testing.T) {
	const ns = "cel-mc"
	f := startAdmission(t, withNamespaces(ns, "tier-x", "tier-y"), withOptions(func(o *Options) { o.Events.Disabled = true }))
	ctx, cl := f.ctx, f.client
	for name, tier := range map[string]string{"tier-x": "x", "tier-y": "y"} {
		var n corev1.Namespace
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			t.Fatal(err)
		}
		n.Labels["tier"] = tier
		if err := cl.Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
	}
	f.installReady(t, celConditionedPolicies)

	t.Run("a CEL policy's conditions are in a webhook of its own, apart from a ClusterPolicy of the same name", func(t *testing.T) {
		want := map[string]struct {
			path       string
			fp         admissionregistrationv1.FailurePolicyType
			conditions []string
		}{
			"validate.charter.svc-fail-finegrained-validatingpolicy.policies.kyverno.io-divide": {
				"/validate/fail/finegrained/validatingpolicy.policies.kyverno.io/divide", admissionregistrationv1.Fail, []string{"2 / 0 == 1"}},
			"validate.charter.svc-ignore-finegrained-validatingpolicy.policies.kyverno.io-divide-open": {
				"/validate/ignore/finegrained/validatingpolicy.policies.kyverno.io/divide-open", admissionregistrationv1.Ignore, []string{"2 / 0 == 1"}},
			"validate.charter.svc-fail-finegrained-divide": {
				"/validate/fail/finegrained/divide", admissionregistrationv1.Fail, []string{"'locked' in object.metadata.labels"}},
			"validate.charter.svc-fail-finegrained-validatingpolicy.policies.kyverno.io-corp-images": {
				"/validate/fail/finegrained/validatingpolicy.policies.kyverno.io/corp-images", admissionregistrationv1.Fail,
				[]string{"request.resource.resource == 'pods'", "c.image.startsWith('corp/')"}},
		}
		eventually(t, "fine-grained webhooks written", 30*time.Second, func() error {
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			if err := cl.Get(ctx, client.ObjectKey{Name: config.ResourceValidatingName}, &vwc); err != nil {
				return err
			}
			seen := map[string]bool{}
			for _, w := range vwc.Webhooks {
				if strings.Contains(w.Name, "corp-registry") || strings.Contains(w.Name, "tiered") {
					return fmt.Errorf("webhook %s: a policy whose conditions the API server cannot evaluate has a webhook of its own", w.Name)
				}
				exp, ok := want[w.Name]
				if !ok {
					continue
				}
				seen[w.Name] = true
				if w.ClientConfig.URL == nil || !strings.HasSuffix(*w.ClientConfig.URL, exp.path) {
					return fmt.Errorf("webhook %s: client config %+v, want a URL ending in %s", w.Name, w.ClientConfig, exp.path)
				}
				if *w.FailurePolicy != exp.fp || len(w.MatchConditions) != 1 {
					return fmt.Errorf("webhook %s: failurePolicy %s, matchConditions %+v", w.Name, *w.FailurePolicy, w.MatchConditions)
				}
				for _, part := range exp.conditions {
					if !strings.Contains(w.MatchConditions[0].Expression, part) {
						return fmt.Errorf("webhook %s: condition %q, want it to hold %q", w.Name, w.MatchConditions[0].Expression, part)
					}
				}
			}
			for name := range want {
				if !seen[name] {
					return errNotYet("no webhook " + name)
				}
			}
			return nil
		})
	})

	t.Run("a condition that errs gets the API server's answer under the policy's failurePolicy", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}
		err := cl.Create(ctx, cm, client.DryRunAll)
		want := `configmaps "cm" is forbidden: expression '2 / 0 == 1' resulted in error: division by zero`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ConfigMap under failurePolicy Fail: %v, want %q", err, want)
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sa"}}
		if err := cl.Create(ctx, sa, client.DryRunAll); err != nil {
			t.Errorf("ServiceAccount under failurePolicy Ignore: %v, want it admitted", err)
		}
	})

	t.Run("the ClusterPolicy of the same name is served on its own path", func(t *testing.T) {
		locked := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "locked", Labels: map[string]string{"locked": ""}}}
		eventually(t, "locked Secret denied", 30*time.Second, deniedBy("validate.charter.svc-fail-finegrained-divide", "locked Secrets are refused",
			func() error { return cl.Create(ctx, locked.DeepCopy(), client.DryRunAll) }))
		open := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "open"}}
		if err := cl.Create(ctx, open, client.DryRunAll); err != nil {
			t.Errorf("unlabelled Secret: %v", err)
		}
	})

	t.Run("a Pod policy's conditions hold only Pods back; its autogen copies still match the controllers", func(t *testing.T) {
		podWith := func(name, image string, labels map[string]string) *corev1.Pod {
			p := podIn(name, ns, labels)
			p.Spec.Containers[0].Image = image
			return p
		}
		if err := cl.Create(ctx, podWith("corp", "corp/app:1", nil), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "corp Pods need an owner") {
			t.Errorf("corp Pod without owner: %v, want the policy's denial", err)
		}
		for _, p := range []*corev1.Pod{podWith("corp-owned", "corp/app:1", map[string]string{"owner": "me"}), podWith("other", "nginx:1", nil)} {
			if err := cl.Create(ctx, p, client.DryRunAll); err != nil {
				t.Errorf("Pod %s: %v", p.Name, err)
			}
		}
		deployment := func(name, image string) *appsv1.Deployment {
			labels := map[string]string{"app": name}
			return &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
					},
				},
			}
		}
		// Unguarded, object.spec.containers errs on a Deployment and the
		// API server refuses every one under failurePolicy Fail.
		if err := cl.Create(ctx, deployment("other", "nginx:1"), client.DryRunAll); err != nil {
			t.Errorf("Deployment of another image: %v, want it admitted", err)
		}
		if err := cl.Create(ctx, deployment("corp", "corp/app:1"), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "corp Pods need an owner") {
			t.Errorf("Deployment of a corp image without owner: %v, want the autogen copy's denial", err)
		}
	})

	t.Run("conditions the API server cannot evaluate are left to charter's engine", func(t *testing.T) {
		corp := podIn("registry", ns, nil)
		corp.Spec.Containers[0].Image = "corp.reg.com/app:1"
		if err := cl.Create(ctx, corp, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "corp.reg.com Pods must be signed") {
			t.Errorf("unsigned corp.reg.com Pod (image() condition): %v, want the policy's denial", err)
		}
		svc := func(ns string) *corev1.Service {
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		}
		if err := cl.Create(ctx, svc("tier-x"), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "no Services in tier x") {
			t.Errorf("Service in tier x (namespaceObject condition): %v, want the policy's denial", err)
		}
		if err := cl.Create(ctx, svc("tier-y"), client.DryRunAll); err != nil {
			t.Errorf("Service in tier y: %v, want it admitted", err)
		}
	})
}
