package background

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestRetargetedRule edits a synchronized generate rule's target on a
// real API server: a new name creates the new object and deletes the old
// one (synchronize without orphanDownstreamOnPolicyDelete), and a new
// kind with orphanDownstreamOnPolicyDelete creates the new object and
// releases the old one (kept, without its generate.kyverno.io and
// managed-by labels).
func TestRetargetedRule(t *testing.T) {
	e := startEnv(t)
	e.namespace("retarget")
	e.startController(Options{})
	e.applyPolicy("default-deny.yaml", nil)
	e.wantPolicyTypes("retarget", networkingv1.PolicyTypeIngress)

	// A new name: the old object is deleted once the new one exists.
	e.applyPolicy("default-deny.yaml", func(p *kyvernov1.ClusterPolicy) {
		p.Spec.Rules[0].Generation.Name = "deny-all"
	})
	e.eventually("NetworkPolicy retarget/deny-all generated and retarget/default-deny deleted", func() error {
		var np networkingv1.NetworkPolicy
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "retarget", Name: "deny-all"}, &np); err != nil {
			return err
		}
		if np.Labels["generate.kyverno.io/rule-name"] != "default-deny" {
			return fmt.Errorf("deny-all labels %v", np.Labels)
		}
		if _, err := e.networkPolicy("retarget"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("default-deny still there (err %v)", err)
		}
		return nil
	})

	// A new kind, orphaning: the old object stays, released.
	e.applyPolicy("default-deny.yaml", func(p *kyvernov1.ClusterPolicy) {
		g := p.Spec.Rules[0].Generation
		g.OrphanDownstreamOnPolicyDelete = true
		g.APIVersion, g.Kind, g.Name = "v1", "ConfigMap", "deny-all"
		g.RawData = &apiextv1.JSON{Raw: []byte(`{"data":{"policy":"deny-all"}}`)}
	})
	e.eventually("ConfigMap retarget/deny-all generated and NetworkPolicy retarget/deny-all released", func() error {
		var cm corev1.ConfigMap
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "retarget", Name: "deny-all"}, &cm); err != nil {
			return err
		}
		if cm.Data["policy"] != "deny-all" || cm.Labels["generate.kyverno.io/policy-name"] != "default-deny" {
			return fmt.Errorf("ConfigMap data %v, labels %v", cm.Data, cm.Labels)
		}
		var np networkingv1.NetworkPolicy
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "retarget", Name: "deny-all"}, &np); err != nil {
			return fmt.Errorf("the released NetworkPolicy: %w", err)
		}
		for k, v := range np.Labels {
			if strings.HasPrefix(k, "generate.kyverno.io/") || (k == "app.kubernetes.io/managed-by" && v == "kyverno") {
				return fmt.Errorf("NetworkPolicy deny-all still labelled %s=%s", k, v)
			}
		}
		if fmt.Sprint(np.Spec.PolicyTypes) != "[Ingress]" {
			return fmt.Errorf("the released NetworkPolicy's spec changed: %v", np.Spec.PolicyTypes)
		}
		return nil
	})
}
