package background

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// retargetedEvent finds a DownstreamRetargeted event about a policy whose
// message holds every part.
func (e *env) retargetedEvent(kind, policy string, parts ...string) error {
	return e.policyEvent(ReasonDownstreamRetargeted, kind, policy, parts...)
}

// policyEvent finds an event of the reason about a policy whose message
// holds every part.
func (e *env) policyEvent(reason, kind, policy string, parts ...string) error {
	var events corev1.EventList
	if err := e.cl.List(e.ctx, &events); err != nil {
		return err
	}
	for _, ev := range events.Items {
		if ev.Reason != reason || ev.InvolvedObject.Kind != kind || ev.InvolvedObject.Name != policy {
			continue
		}
		found := true
		for _, p := range parts {
			found = found && strings.Contains(ev.Message, p)
		}
		if found {
			return nil
		}
	}
	return fmt.Errorf("no %s event on %s %s with %q among %d events", reason, kind, policy, parts, len(events.Items))
}

// editGeneratingPolicy rewrites the template of a GeneratingPolicy's first
// generate entry.
func (e *env) editGeneratingPolicy(name string, edit func(string) string) {
	e.t.Helper()
	var p policiesv1.GeneratingPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: name}, &p); err != nil {
		e.t.Fatal(err)
	}
	tmpl := p.Spec.Generation[0].Template
	before := tmpl.Value
	tmpl.Value = edit(tmpl.Value)
	if tmpl.Value == before {
		e.t.Fatalf("the edit of %s changed nothing", name)
	}
	if err := e.cl.Update(e.ctx, &p); err != nil {
		e.t.Fatal(err)
	}
}

// TestGeneratingPolicyTemplate drives GeneratingPolicies whose objects
// come from templates through the background controller on a real API
// server: the interpolated objects are generated for existing and new
// triggers; an edit that changes what the policy generates generates the
// new objects and deletes the old ones (synchronize) or releases them
// (no synchronize: kept, without their generate.kyverno.io labels), with
// a DownstreamRetargeted event per object; objects the edit did not
// change stay as they are. The trigger's report names what the policy
// generated for it (generated-resources), before and after the edit.
func TestGeneratingPolicyTemplate(t *testing.T) {
	e := startEnv(t)
	e.namespace("tpl-existing")
	e.startControllerWithReports(Options{})
	e.createCELPolicies("gpol-template.yaml")

	settings := func(ns, name, team string) error {
		var cm corev1.ConfigMap
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			return err
		}
		if cm.Data["team"] != team || cm.Labels["generate.kyverno.io/policy-name"] != "gpol-template" {
			return fmt.Errorf("ConfigMap %s/%s data %v, labels %v", ns, name, cm.Data, cm.Labels)
		}
		return nil
	}
	e.eventually("generateExisting: the template's objects in tpl-existing", func() error {
		if _, err := e.tplNetworkPolicy("tpl-existing"); err != nil {
			return err
		}
		if err := settings("tpl-existing", "tpl-existing-settings", "none"); err != nil {
			return err
		}
		return e.cl.Get(e.ctx, client.ObjectKey{Namespace: "tpl-existing", Name: "keep-v1"}, &corev1.ConfigMap{})
	})
	created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tpl-created", Labels: map[string]string{"bg-test": "true", "team": "shop"}}}
	e.create(created)
	e.admit(kyvernov1.Create, created, nil)
	e.eventually("the template's objects in a new namespace, interpolated from it", func() error {
		if _, err := e.tplNetworkPolicy("tpl-created"); err != nil {
			return err
		}
		return settings("tpl-created", "tpl-created-settings", "shop")
	})
	generated := func(names ...string) func() error {
		return func() error {
			got, err := e.reportProperty("", created.UID, "KyvernoGeneratingPolicy", "gpol-template", "gpol-template", "pass", "generated-resources")
			if err != nil {
				return err
			}
			if want := strings.Join(names, "; "); got != want {
				return fmt.Errorf("generated-resources %q, want %q", got, want)
			}
			return nil
		}
	}
	e.eventually("the new namespace's report names what was generated for it", generated(
		"networking.k8s.io/v1, Kind=NetworkPolicy Name=tpl-deny Namespace=tpl-created", "/v1, Kind=ConfigMap Name=tpl-created-settings Namespace=tpl-created"))
	np, err := e.tplNetworkPolicy("tpl-existing")
	if err != nil {
		t.Fatal(err)
	}

	// Synchronized: the settings ConfigMap is renamed; the old one goes
	// once the new one exists, the NetworkPolicy is left as it was.
	e.editGeneratingPolicy("gpol-template", func(v string) string {
		return strings.Replace(v, "(( object.metadata.name ))-settings", "(( object.metadata.name ))-config", 1)
	})
	for _, ns := range []string{"tpl-existing", "tpl-created"} {
		e.eventually("the renamed ConfigMap generated and the old one deleted in "+ns, func() error {
			team := map[string]string{"tpl-existing": "none", "tpl-created": "shop"}[ns]
			if err := settings(ns, ns+"-config", team); err != nil {
				return err
			}
			if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: ns + "-settings"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s/%s-settings still there (err %v)", ns, ns, err)
			}
			return e.retargetedEvent("GeneratingPolicy", "gpol-template", "deleted ConfigMap "+ns+"/"+ns+"-settings", "rule gpol-template")
		})
	}
	e.eventually("the report names what the edited policy generates", generated(
		"networking.k8s.io/v1, Kind=NetworkPolicy Name=tpl-deny Namespace=tpl-created", "/v1, Kind=ConfigMap Name=tpl-created-config Namespace=tpl-created"))
	if after, err := e.tplNetworkPolicy("tpl-existing"); err != nil || after.UID != np.UID || after.ResourceVersion != np.ResourceVersion {
		t.Errorf("the NetworkPolicy the edit did not change was touched: %v (uid %s → %s, resourceVersion %s → %s)", err, np.UID, uidOf(after), np.ResourceVersion, rvOf(after))
	}

	// Not synchronized: the old ConfigMap is released, not deleted.
	e.editGeneratingPolicy("gpol-keep", func(v string) string {
		return strings.NewReplacer("keep-v1", "keep-v2", `version: "1"`, `version: "2"`).Replace(v)
	})
	e.eventually("keep-v2 generated and keep-v1 released", func() error {
		var cm corev1.ConfigMap
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "tpl-existing", Name: "keep-v2"}, &cm); err != nil {
			return err
		}
		if cm.Data["version"] != "2" {
			return fmt.Errorf("keep-v2 data %v", cm.Data)
		}
		var old corev1.ConfigMap
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "tpl-existing", Name: "keep-v1"}, &old); err != nil {
			return fmt.Errorf("the released keep-v1: %w", err)
		}
		for k, v := range old.Labels {
			if strings.HasPrefix(k, "generate.kyverno.io/") || (k == "app.kubernetes.io/managed-by" && v == "kyverno") {
				return fmt.Errorf("keep-v1 still labelled %s=%s", k, v)
			}
		}
		if old.Data["version"] != "1" {
			return fmt.Errorf("the released keep-v1 changed: %v", old.Data)
		}
		return e.retargetedEvent("GeneratingPolicy", "gpol-keep", "released ConfigMap tpl-existing/keep-v1", "rule gpol-keep")
	})
}

func (e *env) tplNetworkPolicy(ns string) (*networkingv1.NetworkPolicy, error) {
	var np networkingv1.NetworkPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "tpl-deny"}, &np); err != nil {
		return nil, err
	}
	if np.Labels["generate.kyverno.io/policy-name"] != "gpol-template" || fmt.Sprint(np.Spec.PolicyTypes) != "[Ingress]" {
		return nil, fmt.Errorf("NetworkPolicy %s/tpl-deny labels %v, policyTypes %v", ns, np.Labels, np.Spec.PolicyTypes)
	}
	return &np, nil
}

func uidOf(np *networkingv1.NetworkPolicy) types.UID {
	if np == nil {
		return ""
	}
	return np.UID
}

func rvOf(np *networkingv1.NetworkPolicy) string {
	if np == nil {
		return ""
	}
	return np.ResourceVersion
}
