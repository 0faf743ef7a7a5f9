package admission

import (
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/webhook/config"
)

// TestAdmissionOnRealAPIServer runs the admission controller out of
// cluster against a real kube-apiserver with URL webhooks.
func TestAdmissionOnRealAPIServer(t *testing.T) {
	f := startAdmission(t)
	ctx, cl := f.ctx, f.client

	t.Run("an invalid policy is refused with its field path", func(t *testing.T) {
		bad := policyFile(t, "bad-anchor.yaml")
		// The API server may call the webhook before its certificate is
		// served; retry until the answer is the webhook's.
		eventually(t, "policy refused", 30*time.Second, func() error {
			err := cl.Create(ctx, bad.DeepCopy())
			if err == nil {
				_ = cl.Delete(ctx, bad.DeepCopy())
				t.Fatal("invalid policy was admitted")
			}
			if !strings.Contains(err.Error(), `admission webhook "validate-policy.charter.svc" denied the request`) ||
				!strings.Contains(err.Error(), "spec.rules[0].validate.pattern.spec.containers[0]") {
				return err
			}
			return nil
		})
	})

	t.Run("the deprecated generateExistingOnPolicyUpdate is refused, as in Kyverno", func(t *testing.T) {
		err := cl.Create(ctx, policyFile(t, "generate-existing-old-name.yaml"))
		if err == nil || !strings.Contains(err.Error(), `ClusterPolicy "generate-existing-old-name": spec.generateExistingOnPolicyUpdate: the deprecated field is refused`) {
			t.Errorf("got %v, want a denial naming spec.generateExistingOnPolicyUpdate", err)
		}
	})

	enforce := policyFile(t, "require-labels.yaml")
	if err := cl.Create(ctx, enforce); err != nil {
		t.Fatal(err)
	}
	eventually(t, "resource webhook for pods", 30*time.Second, func() error {
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		if err := cl.Get(ctx, client.ObjectKey{Name: config.ResourceValidatingName}, &v); err != nil {
			return err
		}
		for _, w := range v.Webhooks {
			for _, r := range w.Rules {
				for _, res := range r.Resources {
					if w.Name == config.ValidateWebhookFail && res == "pods" {
						return nil
					}
				}
			}
		}
		return errNotYet("no pods rule in " + config.ValidateWebhookFail)
	})

	t.Run("Enforce blocks a bad Pod with the policy's message", func(t *testing.T) {
		eventually(t, "bad Pod refused", 30*time.Second, func() error {
			err := cl.Create(ctx, pod("bad", nil))
			if err == nil {
				_ = cl.Delete(ctx, pod("bad", nil))
				return errNotYet("bad Pod admitted (policy not in the cache yet?)")
			}
			want := `admission webhook "validate.charter.svc-fail" denied the request: ` +
				"\n\nresource Pod/default/bad was blocked due to the following policies \n\nrequire-labels:\n" +
				"  check-for-labels: 'validation error: label ''app.kubernetes.io/name'' is required. rule check-for-labels failed at path /metadata/labels/'"
			if !strings.Contains(err.Error(), want) {
				return err
			}
			return nil
		})
	})

	t.Run("a good Pod is admitted", func(t *testing.T) {
		if err := cl.Create(ctx, pod("good", map[string]string{"app.kubernetes.io/name": "web"})); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("kube-system is left alone", func(t *testing.T) {
		p := pod("system", nil)
		p.Namespace = "kube-system"
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a deleted configuration comes back", func(t *testing.T) {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: config.ResourceValidatingName}}
		if err := cl.Delete(ctx, v); err != nil {
			t.Fatal(err)
		}
		eventually(t, "configuration recreated", 30*time.Second, func() error {
			return cl.Get(ctx, client.ObjectKey{Name: config.ResourceValidatingName}, v)
		})
	})

	t.Run("cleanup removes every configuration", func(t *testing.T) {
		if err := f.stopManager(); err != nil {
			t.Errorf("manager: %v", err)
		}
		if err := config.Cleanup(ctx, cl); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{config.ResourceValidatingName, config.PolicyValidatingName} {
			err := cl.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s after cleanup: %v", name, err)
			}
		}
		// With charter gone and its webhooks removed, Pods are admitted.
		if err := cl.Create(ctx, pod("after", nil)); err != nil {
			t.Errorf("Pod after cleanup: %v", err)
		}
	})
}
