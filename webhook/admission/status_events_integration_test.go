package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	webhookconfig "github.com/charter-dev/charter/webhook/config"
)

// TestPolicyStatusAndEventsOnRealAPIServer: policies get their Ready
// condition from what the admission controller serves, and admission
// decisions leave Kyverno-named Events on the policy and the resource.
func TestPolicyStatusAndEventsOnRealAPIServer(t *testing.T) {
	// Written before charter runs, so no policy validation webhook
	// stands in the way of the invalid one.
	invalid := policyFile(t, "bad-anchor.yaml")
	enforce := policyFile(t, "require-labels.yaml")
	audit := policyFile(t, "require-team.yaml")
	f := startAdmission(t,
		withObjects(invalid, enforce, audit),
		withOptions(func(o *Options) { o.StatusResync = 500 * time.Millisecond }),
	)
	ctx, cl := f.ctx, f.client

	ready := func(name string) (*kyvernov1.ClusterPolicy, *metav1.Condition, error) {
		var p kyvernov1.ClusterPolicy
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			return nil, nil, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, kyvernov1.PolicyConditionReady)
		if c == nil {
			return &p, nil, errNotYet(name + ": no Ready condition yet")
		}
		return &p, c, nil
	}

	t.Run("a served policy is Ready", func(t *testing.T) {
		var p *kyvernov1.ClusterPolicy
		eventually(t, "require-labels Ready", 30*time.Second, func() error {
			var c *metav1.Condition
			var err error
			if p, c, err = ready("require-labels"); err != nil {
				return err
			}
			if c.Status != metav1.ConditionTrue || c.Reason != "Succeeded" || c.Message != "Ready" || c.ObservedGeneration != p.Generation {
				return fmt.Errorf("Ready condition %+v at generation %d", c, p.Generation)
			}
			return nil
		})
		if p.Status.Ready != nil {
			t.Errorf("deprecated status.ready = %v, want unset", *p.Status.Ready)
		}
		// kubectl get cpol's ADMISSION and BACKGROUND columns read
		// status: set with their defaults, and spec left as written.
		if p.Status.Admission == nil || !*p.Status.Admission || p.Status.Background == nil || !*p.Status.Background {
			t.Errorf("status admission %v, background %v; want true, true", p.Status.Admission, p.Status.Background)
		}
		if p.Spec.Admission != nil || p.Spec.Background != nil {
			t.Errorf("spec rewritten: admission %v, background %v", p.Spec.Admission, p.Spec.Background)
		}
		if p.Status.RuleCount.Validate != 1 || len(p.Status.Autogen.Rules) != 2 || p.Status.Autogen.Rules[0].Name != "autogen-check-for-labels" {
			t.Errorf("rulecount %+v, autogen rules %d", p.Status.RuleCount, len(p.Status.Autogen.Rules))
		}
		// The status controller resyncs every 500 ms: a policy whose status
		// is right is not written again.
		rv := p.ResourceVersion
		time.Sleep(2 * time.Second)
		var again kyvernov1.ClusterPolicy
		if err := cl.Get(ctx, client.ObjectKey{Name: "require-labels"}, &again); err != nil {
			t.Fatal(err)
		}
		if again.ResourceVersion != rv {
			t.Errorf("status rewritten without a change: resourceVersion %s -> %s", rv, again.ResourceVersion)
		}
	})

	t.Run("a policy is Ready only once the webhooks send its kinds", func(t *testing.T) {
		// No policy matched ConfigMaps before: the API server sends them
		// to charter only once the webhook configuration names them, and
		// the policy must not look in force before that.
		var p kyvernov1.ClusterPolicy
		if err := yaml.UnmarshalStrict([]byte(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: audit-configmaps}
spec:
  rules:
  - name: named
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {failureAction: Audit, message: m, pattern: {metadata: {name: "?*"}}}
`), &p); err != nil {
			t.Fatal(err)
		}
		if err := cl.Create(ctx, &p); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, c, err := ready(p.Name); err == nil && c.Status == metav1.ConditionTrue {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not Ready within 30 s", p.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		if err := cl.Get(ctx, client.ObjectKey{Name: webhookconfig.ResourceValidatingName}, &v); err != nil {
			t.Fatal(err)
		}
		var resources []string
		for _, w := range v.Webhooks {
			for _, r := range w.Rules {
				resources = append(resources, r.Resources...)
			}
		}
		if !slices.Contains(resources, "configmaps") {
			t.Errorf("%s Ready while the validating webhooks send only %v", p.Name, resources)
		}
	})

	t.Run("a policy that does not compile is not Ready and names the field", func(t *testing.T) {
		eventually(t, "bad-anchor not Ready", 30*time.Second, func() error {
			p, c, err := ready("bad-anchor")
			if err != nil {
				return err
			}
			want := `spec.rules[0].validate.pattern.spec.containers[0]: unknown anchor "~(x)"`
			if c.Status != metav1.ConditionFalse || c.Reason != "Failed" || !strings.Contains(c.Message, want) || c.ObservedGeneration != p.Generation {
				return fmt.Errorf("Ready condition %+v, want False/Failed naming %s", c, want)
			}
			return nil
		})
	})

	t.Run("an Enforce denial leaves a PolicyViolation event on the policy", func(t *testing.T) {
		eventually(t, "bad Pod refused", 30*time.Second, func() error {
			err := cl.Create(ctx, pod("bad", map[string]string{"team": "web"}))
			if err == nil {
				_ = cl.Delete(ctx, pod("bad", nil))
				return errNotYet("bad Pod admitted (webhook not in place yet?)")
			}
			if !strings.Contains(err.Error(), "was blocked due to the following policies") {
				return err
			}
			return nil
		})
		ev := waitForEvent(ctx, t, cl, func(e *eventsv1.Event) bool {
			return e.Regarding.Kind == "ClusterPolicy" && e.Regarding.Name == "require-labels" && e.Related != nil && e.Related.Name == "bad"
		})
		wantNote := "Pod default/bad: [check-for-labels] fail (blocked); validation error: label 'app.kubernetes.io/name' is required. " +
			"rule check-for-labels failed at path /metadata/labels/app.kubernetes.io/name/"
		checkEvent(t, ev, "PolicyViolation", "Resource Blocked", corev1.EventTypeWarning, "")
		if ev.Regarding.APIVersion != "kyverno.io/v1" || ev.Regarding.UID == "" || ev.Related.Kind != "Pod" {
			t.Errorf("references: regarding %+v, related %+v", ev.Regarding, ev.Related)
		}
		if !strings.HasPrefix(ev.Note, "Pod default/bad: [check-for-labels] fail (blocked); validation error: ") {
			t.Errorf("note %q, want like %q", ev.Note, wantNote)
		}
		// A denied request runs no audit pass: nothing on the Audit policy.
		if found := findEvent(ctx, t, cl, func(e *eventsv1.Event) bool { return e.Regarding.Name == "require-team" }); found != nil {
			t.Errorf("the denied request left an Audit event: %q", found.Note)
		}
	})

	t.Run("an Audit failure leaves events on the policy and on the Pod", func(t *testing.T) {
		if err := cl.Create(ctx, pod("no-team", map[string]string{"app.kubernetes.io/name": "web"})); err != nil {
			t.Fatal(err)
		}
		onPolicy := waitForEvent(ctx, t, cl, func(e *eventsv1.Event) bool {
			return e.Regarding.Name == "require-team" && e.Related != nil && e.Related.Name == "no-team"
		})
		checkEvent(t, onPolicy, "PolicyViolation", "None", corev1.EventTypeWarning,
			"Pod default/no-team: [check-team] fail; validation error: label 'team' is required. rule check-team failed at path /metadata/labels/team/")
		onPod := waitForEvent(ctx, t, cl, func(e *eventsv1.Event) bool {
			return e.Regarding.Kind == "Pod" && e.Regarding.Name == "no-team" && strings.HasPrefix(e.Note, "policy require-team/")
		})
		checkEvent(t, onPod, "PolicyViolation", "None", corev1.EventTypeWarning,
			"policy require-team/check-team fail: validation error: label 'team' is required. rule check-team failed at path /metadata/labels/team/")
		if onPod.Regarding.UID == "" {
			t.Error("the Pod event's reference has no UID")
		}
		// The Enforce rule the Pod passed is no violation: no event says so.
		if found := findEvent(ctx, t, cl, func(e *eventsv1.Event) bool {
			return e.Regarding.Name == "no-team" && strings.HasPrefix(e.Note, "policy require-labels/")
		}); found != nil {
			t.Errorf("an event for a rule that passed: %q", found.Note)
		}
	})

	t.Run("deleting a non-compliant Pod is no violation", func(t *testing.T) {
		onNoTeam := func() int {
			n := 0
			var list eventsv1.EventList
			if err := cl.List(ctx, &list, client.InNamespace("default")); err != nil {
				t.Fatal(err)
			}
			for _, e := range list.Items {
				if (e.Regarding.Name == "no-team") || (e.Related != nil && e.Related.Name == "no-team") {
					n++
				}
			}
			return n
		}
		before := onNoTeam()
		if err := cl.Delete(ctx, pod("no-team", nil)); err != nil {
			t.Fatal(err)
		}
		// A later failing request's events mark that the sink has moved past
		// the DELETE.
		if err := cl.Create(ctx, pod("after-delete", map[string]string{"app.kubernetes.io/name": "web"})); err != nil {
			t.Fatal(err)
		}
		waitForEvent(ctx, t, cl, func(e *eventsv1.Event) bool {
			return e.Regarding.Kind == "Pod" && e.Regarding.Name == "after-delete"
		})
		if after := onNoTeam(); after != before {
			t.Errorf("the DELETE left %d events about no-team", after-before)
		}
	})

	t.Run("fixing a policy makes it Ready at its new generation", func(t *testing.T) {
		var p kyvernov1.ClusterPolicy
		if err := cl.Get(ctx, client.ObjectKey{Name: "bad-anchor"}, &p); err != nil {
			t.Fatal(err)
		}
		p.Spec.Rules[0].Validation = enforce.Spec.Rules[0].Validation.DeepCopy()
		if err := cl.Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
		eventually(t, "bad-anchor Ready", 30*time.Second, func() error {
			got, c, err := ready("bad-anchor")
			if err != nil {
				return err
			}
			if c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation || got.Generation < 2 {
				return fmt.Errorf("Ready condition %+v at generation %d", c, got.Generation)
			}
			return nil
		})
	})
}

// findEvent returns an events.k8s.io/v1 Event in default that matches.
func findEvent(ctx context.Context, t *testing.T, cl client.Client, match func(*eventsv1.Event) bool) *eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := cl.List(ctx, &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if match(&list.Items[i]) {
			return &list.Items[i]
		}
	}
	return nil
}

func waitForEvent(ctx context.Context, t *testing.T, cl client.Client, match func(*eventsv1.Event) bool) *eventsv1.Event {
	t.Helper()
	var ev *eventsv1.Event
	eventually(t, "event", 15*time.Second, func() error {
		if ev = findEvent(ctx, t, cl, match); ev == nil {
			return errNotYet("no matching event yet")
		}
		return nil
	})
	return ev
}

// checkEvent checks the fields clients filter on; note "" skips the note.
func checkEvent(t *testing.T, ev *eventsv1.Event, reason, action, typ, note string) {
	t.Helper()
	if ev.Reason != reason || ev.Action != action || ev.Type != typ || ev.ReportingController != "kyverno-admission" ||
		!strings.HasPrefix(ev.ReportingInstance, "kyverno-admission-") {
		t.Errorf("event %s: reason %q action %q type %q reporting %q/%q", ev.Name, ev.Reason, ev.Action, ev.Type,
			ev.ReportingController, ev.ReportingInstance)
	}
	if note != "" && ev.Note != note {
		t.Errorf("event %s note:\n got %q\nwant %q", ev.Name, ev.Note, note)
	}
}
