package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/webhook/config"
)

// TestPromotionOnRealAPIServer walks a namespace from Audit to Enforce
// through the gate (DESIGN.md, Flows 6): a staged Audit policy admits a
// bad Pod; labelling the namespace enforce is refused while that Pod's
// report fails, admitted once the report is clean; then bad Pods are
// refused there and still admitted in other namespaces.
//
// The reports are written by the test, as the reports controller writes
// them (admission-reports.md §6: one PolicyReport per resource, named by
// its UID, labelled app.kubernetes.io/managed-by: charter, the resource as
// scope), so the test depends on admission alone.
func TestPromotionOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withNamespaces("shop", "other"))
	ctx, cl := f.ctx, f.client

	staged := policyFile(t, "staged-require-name-label.yaml")
	eventually(t, "staged policy created", 30*time.Second, func() error { return cl.Create(ctx, staged) })
	// The configuration is built from the policy cache: once it routes
	// Namespaces to the gate, the staged policy is in the cache.
	eventually(t, "promotion webhook", 30*time.Second, func() error {
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		if err := cl.Get(ctx, client.ObjectKey{Name: config.ResourceValidatingName}, &v); err != nil {
			return err
		}
		for _, w := range v.Webhooks {
			if w.Name == config.PromotionWebhook {
				return nil
			}
		}
		return errNotYet("no " + config.PromotionWebhook + " webhook yet")
	})

	bad := func(name, ns string) *corev1.Pod {
		p := pod(name, nil)
		p.Namespace = ns
		return p
	}
	legacy := bad("legacy", "shop")
	t.Run("a staged Audit policy admits a bad Pod in an unlabelled namespace", func(t *testing.T) {
		eventually(t, "bad Pod admitted", 30*time.Second, func() error { return cl.Create(ctx, legacy) })
	})

	report := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2",
		"kind":       "PolicyReport",
		"metadata": map[string]any{
			"name": string(legacy.UID), "namespace": "shop",
			"labels": map[string]any{"app.kubernetes.io/managed-by": "charter"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Pod", "name": legacy.Name, "uid": string(legacy.UID)}},
		},
		"scope": map[string]any{"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": legacy.Name, "uid": string(legacy.UID)},
		"results": []any{map[string]any{
			"source": "charter", "policy": staged.Name, "rule": "check-name", "result": "fail", "scored": true,
			"message": "validation error: label 'app.kubernetes.io/name' is required. rule check-name failed at path /metadata/labels/"}},
		"summary": map[string]any{"fail": int64(1)},
	}}
	if err := cl.Create(ctx, report); err != nil {
		t.Fatal(err)
	}
	setEnforcement := func(ns, value string) error {
		var n corev1.Namespace
		if err := cl.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels["charter.dev/enforcement"] = value
		return cl.Update(ctx, &n)
	}

	t.Run("labelling the namespace enforce is refused while its report fails", func(t *testing.T) {
		err := setEnforcement("shop", "enforce")
		if err == nil {
			t.Fatal("namespace shop promoted although Pod/legacy fails the staged policy")
		}
		want := `admission webhook "promotion.charter.svc" denied the request: ` +
			`namespace "shop" cannot be labelled charter.dev/enforcement=enforce: ` +
			`1 result of a staged policy fails there and would be denied under Enforce: ` +
			`Pod/legacy (require-name-label/check-name: fail); fix them or add PolicyExceptions, then label the namespace again`
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error\n got %v\nwant it to contain %q", err, want)
		}
	})

	t.Run("a value other than audit or enforce is refused", func(t *testing.T) {
		err := setEnforcement("other", "Enforce")
		if err == nil || !strings.Contains(err.Error(), `label charter.dev/enforcement="Enforce": want "audit" or "enforce"`) {
			t.Fatalf("setting charter.dev/enforcement=Enforce: %v, want a refusal naming the value", err)
		}
	})

	t.Run("labelling the namespace enforce is admitted once the report is clean", func(t *testing.T) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(report), report); err != nil {
			t.Fatal(err)
		}
		results, _, _ := unstructured.NestedSlice(report.Object, "results")
		results[0].(map[string]any)["result"] = "pass"
		delete(results[0].(map[string]any), "message")
		if err := unstructured.SetNestedSlice(report.Object, results, "results"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedMap(report.Object, map[string]any{"pass": int64(1)}, "summary"); err != nil {
			t.Fatal(err)
		}
		if err := cl.Update(ctx, report); err != nil {
			t.Fatal(err)
		}
		if err := setEnforcement("shop", "enforce"); err != nil {
			t.Fatalf("promoting shop with clean reports: %v", err)
		}
	})

	t.Run("the promoted namespace refuses bad Pods; others still admit them", func(t *testing.T) {
		// The policy cache learns the namespace's new label from its
		// informer, a moment after the update.
		eventually(t, "bad Pod refused in shop", 30*time.Second, func() error {
			p := bad("new", "shop")
			err := cl.Create(ctx, p)
			if err == nil {
				_ = cl.Delete(ctx, p)
				return errNotYet("bad Pod admitted in shop")
			}
			want := `admission webhook "validate.charter.svc-fail" denied the request: ` +
				"\n\nresource Pod/shop/new was blocked due to the following policies \n\nrequire-name-label:\n" +
				"  check-name: 'validation error: label ''app.kubernetes.io/name'' is required. rule check-name failed at path /metadata/labels/'"
			if !strings.Contains(err.Error(), want) {
				return fmt.Errorf("refused, but not by the staged policy: %w", err)
			}
			return nil
		})
		good := pod("good", map[string]string{"app.kubernetes.io/name": "web"})
		good.Namespace = "shop"
		if err := cl.Create(ctx, good); err != nil {
			t.Errorf("good Pod in shop: %v", err)
		}
		if err := cl.Create(ctx, bad("elsewhere", "other")); err != nil {
			t.Errorf("bad Pod in the unlabelled namespace other: %v", err)
		}
	})

	t.Run("editing an enforcing namespace is not gated again; audit demotes it", func(t *testing.T) {
		// A failing result appears after promotion: the namespace stays
		// editable, and moving it back to audit needs no proof.
		if err := cl.Get(ctx, client.ObjectKeyFromObject(report), report); err != nil {
			t.Fatal(err)
		}
		results, _, _ := unstructured.NestedSlice(report.Object, "results")
		results[0].(map[string]any)["result"] = "fail"
		_ = unstructured.SetNestedSlice(report.Object, results, "results")
		if err := cl.Update(ctx, report); err != nil {
			t.Fatal(err)
		}
		var n corev1.Namespace
		if err := cl.Get(ctx, client.ObjectKey{Name: "shop"}, &n); err != nil {
			t.Fatal(err)
		}
		n.Labels["team"] = "web"
		if err := cl.Update(ctx, &n); err != nil {
			t.Fatalf("editing the enforcing namespace: %v", err)
		}
		if err := setEnforcement("shop", "audit"); err != nil {
			t.Fatalf("demoting shop to audit: %v", err)
		}
		eventually(t, "bad Pod admitted again in shop", 30*time.Second, func() error {
			p := bad(fmt.Sprintf("again-%d", time.Now().UnixNano()), "shop")
			return cl.Create(ctx, p)
		})
	})
}
