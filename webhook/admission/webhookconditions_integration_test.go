package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/webhook/config"
)

// conditionedPolicies need an owner label on the Pods their webhook
// matchConditions select: a ClusterPolicy for team a's Pods, a Policy of
// namespace shop for its Pods named x-*, and a ClusterPolicy whose
// condition cannot be evaluated in namespace errs (a missing label) under
// failurePolicy Fail.
const conditionedPolicies = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: team-a
spec:
  validationFailureAction: Enforce
  background: false
  webhookConfiguration:
    matchConditions:
    - name: team-a
      expression: "object != null && has(object.metadata.labels) && object.metadata.labels.exists(k, k == 'team' && object.metadata.labels[k] == 'a')"
  rules:
  - name: owner
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "team a Pods need an owner"
      pattern: {metadata: {labels: {owner: "?*"}}}
---
apiVersion: kyverno.io/v1
kind: Policy
metadata:
  name: x-pods
  namespace: shop
spec:
  validationFailureAction: Enforce
  background: false
  webhookConfiguration:
    failurePolicy: Ignore
    matchConditions:
    - name: x-named
      expression: "object != null && object.metadata.name.startsWith('x-')"
  rules:
  - name: owner
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "x Pods need an owner"
      pattern: {metadata: {labels: {owner: "?*"}}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: tier-x
spec:
  validationFailureAction: Audit
  background: false
  webhookConfiguration:
    failurePolicy: Fail
    matchConditions:
    - name: tier
      expression: "object == null || object.metadata.namespace != 'errs' ? false : object.metadata.labels['tier'] == 'x'"
  rules:
  - name: anything
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "audited"
      pattern: {metadata: {name: "?*"}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: mark
spec:
  background: false
  webhookConfiguration:
    matchConditions:
    - name: in-mut
      expression: "object != null && object.metadata.namespace == 'mut' && object.metadata.name.startsWith('m-')"
  rules:
  - name: mark
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchStrategicMerge: {metadata: {labels: {marked: "yes"}}}
`

// TestWebhookMatchConditionsOnRealAPIServer: a policy with
// spec.webhookConfiguration.matchConditions gets a webhook of its own
// carrying them, and the API server sends it only the requests they
// select (Kyverno's fine-grained webhook): the policy denies those, and
// never sees the others. A condition that cannot be evaluated follows
// the policy's failurePolicy, in the API server.
func TestWebhookMatchConditionsOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withNamespaces("shop", "errs", "mut"), withOptions(func(o *Options) { o.Events.Disabled = true }))
	ctx, cl := f.ctx, f.client
	f.installReady(t, conditionedPolicies)

	t.Run("each policy has its own webhook with its conditions", func(t *testing.T) {
		want := map[string]struct {
			path       string
			fp         admissionregistrationv1.FailurePolicyType
			conditions string
		}{
			"validate.charter.svc-fail-finegrained-team-a":        {"/validate/fail/finegrained/team-a", admissionregistrationv1.Fail, "team-a"},
			"validate.charter.svc-fail-finegrained-tier-x":        {"/validate/fail/finegrained/tier-x", admissionregistrationv1.Fail, "tier"},
			"validate.charter.svc-ignore-finegrained-shop-x-pods": {"/validate/ignore/finegrained/shop/x-pods", admissionregistrationv1.Ignore, "x-named"},
		}
		eventually(t, "fine-grained webhooks written", 30*time.Second, func() error {
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			if err := cl.Get(ctx, client.ObjectKey{Name: config.ResourceValidatingName}, &vwc); err != nil {
				return err
			}
			var names []string
			for _, w := range vwc.Webhooks {
				names = append(names, w.Name)
				exp, ok := want[w.Name]
				if !ok {
					continue
				}
				if w.ClientConfig.URL == nil || !strings.HasSuffix(*w.ClientConfig.URL, exp.path) {
					return fmt.Errorf("webhook %s: client config %+v, want a URL ending in %s", w.Name, w.ClientConfig, exp.path)
				}
				if *w.FailurePolicy != exp.fp || len(w.MatchConditions) != 1 || w.MatchConditions[0].Name != exp.conditions {
					return fmt.Errorf("webhook %s: failurePolicy %s, matchConditions %+v", w.Name, *w.FailurePolicy, w.MatchConditions)
				}
			}
			for name := range want {
				if !strings.Contains(strings.Join(names, " "), name) {
					return errNotYet(fmt.Sprintf("webhooks %v, want %s", names, name))
				}
			}
			return nil
		})
	})

	create := func(name, ns string, labels map[string]string) error {
		return cl.Create(ctx, podIn(name, ns, labels), client.DryRunAll)
	}
	t.Run("a request the conditions select is evaluated on the policy's own path", func(t *testing.T) {
		eventually(t, "team a Pod denied", 30*time.Second, deniedBy("validate.charter.svc-fail-finegrained-team-a", "team a Pods need an owner",
			func() error { return create("a", "default", map[string]string{"team": "a"}) }))
		eventually(t, "shop x- Pod denied", 30*time.Second, deniedBy("validate.charter.svc-ignore-finegrained-shop-x-pods", "x Pods need an owner",
			func() error { return create("x-1", "shop", nil) }))
	})
	t.Run("a request they do not select never reaches the policy", func(t *testing.T) {
		for _, c := range []struct {
			name, ns string
			labels   map[string]string
		}{
			{"b", "default", map[string]string{"team": "b"}},
			{"unlabelled", "default", nil},
			{"a-owned", "default", map[string]string{"team": "a", "owner": "me"}},
			{"y-1", "shop", nil},
			// x-pods is a Policy of shop: its conditions are never asked
			// about other namespaces.
			{"x-1", "default", nil},
		} {
			if err := create(c.name, c.ns, c.labels); err != nil {
				t.Errorf("Pod %s/%s %v: %v", c.ns, c.name, c.labels, err)
			}
		}
	})
	t.Run("a condition that cannot be evaluated follows the failurePolicy", func(t *testing.T) {
		err := create("no-tier", "errs", nil)
		if err == nil || !strings.Contains(err.Error(), "tier") {
			t.Fatalf("a Pod whose condition errs under failurePolicy Fail: got %v, want the API server's refusal naming the condition", err)
		}
		if err := create("tiered", "errs", map[string]string{"tier": "y"}); err != nil {
			t.Errorf("a Pod whose condition is false: %v", err)
		}
	})
	t.Run("a mutate policy's own mutating webhook patches only what its conditions select", func(t *testing.T) {
		eventually(t, "m- Pod marked", 30*time.Second, func() error {
			p := podIn("m-1", "mut", nil)
			if err := cl.Create(ctx, p, client.DryRunAll); err != nil {
				return err
			}
			if p.Labels["marked"] != "yes" {
				return errNotYet(fmt.Sprintf("labels %v", p.Labels))
			}
			return nil
		})
		p := podIn("other", "mut", nil)
		if err := cl.Create(ctx, p, client.DryRunAll); err != nil || p.Labels["marked"] != "" {
			t.Errorf("a Pod the conditions do not select: %v, labels %v", err, p.Labels)
		}
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := cl.Get(ctx, client.ObjectKey{Name: config.ResourceMutatingName}, &mwc); err != nil {
			t.Fatal(err)
		}
		if len(mwc.Webhooks) != 1 || mwc.Webhooks[0].Name != "mutate.charter.svc-fail-finegrained-mark" {
			t.Errorf("mutating webhooks %+v, want mutate.charter.svc-fail-finegrained-mark alone", mwc.Webhooks)
		}
	})
	t.Run("the shared webhooks do not carry the conditioned policies", func(t *testing.T) {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := cl.Get(ctx, client.ObjectKey{Name: config.ResourceValidatingName}, &vwc); err != nil {
			t.Fatal(err)
		}
		for _, w := range vwc.Webhooks {
			if (w.Name == config.ValidateWebhookFail || w.Name == config.ValidateWebhookIgnore) && !equality.Semantic.DeepEqual(w.MatchConditions, []admissionregistrationv1.MatchCondition(nil)) {
				t.Errorf("shared webhook %s carries matchConditions %+v", w.Name, w.MatchConditions)
			}
		}
	})
}
