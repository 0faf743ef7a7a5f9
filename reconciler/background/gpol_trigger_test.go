package background

import (
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// relabel sets a namespace's labels and hands the UPDATE to admission's
// UpdateRequest generator, as the webhook would.
func (e *env) relabel(ns *corev1.Namespace, labels map[string]string) *corev1.Namespace {
	e.t.Helper()
	old := ns.DeepCopy()
	cur := ns.DeepCopy()
	cur.Labels = maps.Clone(labels)
	if err := e.cl.Update(e.ctx, cur); err != nil {
		e.t.Fatal(err)
	}
	e.admit(kyvernov1.Update, cur, old)
	return cur
}

// wantOnlyFollowed waits until the objects gpol-follow generated for the
// trigger are exactly want ("Kind namespace/name"; NetworkPolicies, then
// ConfigMaps).
func (e *env) wantOnlyFollowed(trigger *corev1.Namespace, want ...string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("objects of %s: %v", trigger.Name, want), func() error {
		generated := client.MatchingLabels{"generate.kyverno.io/policy-name": "gpol-follow", "generate.kyverno.io/trigger-uid": string(trigger.UID)}
		var nps networkingv1.NetworkPolicyList
		if err := e.cl.List(e.ctx, &nps, generated); err != nil {
			return err
		}
		var cms corev1.ConfigMapList
		if err := e.cl.List(e.ctx, &cms, generated); err != nil {
			return err
		}
		var got []string
		for _, np := range nps.Items {
			got = append(got, "NetworkPolicy "+np.Namespace+"/"+np.Name)
		}
		for _, cm := range cms.Items {
			got = append(got, "ConfigMap "+cm.Namespace+"/"+cm.Name)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("found %v", got)
		}
		return nil
	})
}

// TestGeneratingPolicyTriggerUpdate: a synchronized GeneratingPolicy
// follows its trigger's updates on a real API server. An UPDATE that
// changes the generated object's name, namespace or kind generates the
// new object and deletes the old one, with a DownstreamRetargeted event
// naming the trigger; an UPDATE after which the trigger no longer passes
// the matchConditions deletes what was generated for it; another
// trigger's object is left alone throughout.
func TestGeneratingPolicyTriggerUpdate(t *testing.T) {
	e := startEnv(t)
	e.startController(Options{})
	e.createCELPolicies("gpol-trigger-update.yaml")
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}})
	var nss []*corev1.Namespace
	for _, name := range []string{"web", "shop"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"netpol": "on", "flavour": "a"}}}
		e.create(ns)
		e.admit(kyvernov1.Create, ns, nil)
		nss = append(nss, ns)
	}
	web, shop := nss[0], nss[1]
	e.wantOnlyFollowed(web, "NetworkPolicy web/deny-a")
	e.wantOnlyFollowed(shop, "NetworkPolicy shop/deny-a")

	// Another name.
	web = e.relabel(web, map[string]string{"netpol": "on", "flavour": "b"})
	e.wantOnlyFollowed(web, "NetworkPolicy web/deny-b")
	e.eventually("a DownstreamRetargeted event names the trigger and the deleted object", func() error {
		return e.retargetedEvent("GeneratingPolicy", "gpol-follow", "for Namespace web", "deleted NetworkPolicy web/deny-a")
	})

	// Another namespace.
	web = e.relabel(web, map[string]string{"netpol": "on", "flavour": "b", "into": "elsewhere"})
	e.wantOnlyFollowed(web, "NetworkPolicy elsewhere/deny-b")

	// Another kind.
	web = e.relabel(web, map[string]string{"netpol": "on", "flavour": "b", "into": "elsewhere", "as": "configmap"})
	e.wantOnlyFollowed(web, "ConfigMap elsewhere/deny-b")

	// No longer passing the matchConditions.
	e.relabel(web, map[string]string{"netpol": "off"})
	e.wantOnlyFollowed(web)

	// shop's object was never touched.
	var np networkingv1.NetworkPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "shop", Name: "deny-a"}, &np); err != nil {
		t.Errorf("shop's NetworkPolicy: %v", err)
	}
}
