package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// The webhook specs (issue #27, "the webhook trusts only the API
// server"): the attacker reaches charter's webhook port (here, where
// charter serve listens on this machine) and posts AdmissionReviews of
// its own making, claiming system:masters. The platform's ClusterPolicy
// labels a Namespace for an approved request of a cluster admin; the
// attacker holds namespace-admin rights in secWebhookTenantNS and may
// label no Namespace itself.
const (
	secWebhookCharterNS = "e2e-sec-webhook-charter"
	secWebhookTenantNS  = "e2e-sec-webhook-a"
	secWebhookVictimNS  = "e2e-sec-webhook-b"
	secWebhookTenant    = "e2e-sec-webhook-tenant"
	secWebhookLabel     = "e2e-sec-webhook/relabelled"
	secWebhookTrigger   = "label-request"
)

// secWebhookApprovedLabel is the platform's ClusterPolicy the forged
// reviews aim at: a cluster admin's approved label-request ConfigMap
// labels its Namespace.
const secWebhookApprovedLabel = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-sec-webhook-admins-label}
spec:
  background: false
  rules:
  - name: label-namespace
    match: {any: [{resources: {kinds: [ConfigMap], names: [label-request], namespaces: [e2e-sec-webhook-a, e2e-sec-webhook-b]}}]}
    preconditions:
      all:
      - {key: "{{ request.userInfo.groups }}", operator: AnyIn, value: [system:masters]}
      - {key: "{{ request.object.data.approved || '' }}", operator: Equals, value: "yes"}
    mutate:
      targets:
      - {apiVersion: v1, kind: Namespace, name: "{{ request.object.metadata.namespace }}"}
      patchStrategicMerge:
        metadata: {labels: {e2e-sec-webhook/relabelled: forged}}
`

// charter runs with the suite admin's rights, as its background role may
// label Namespaces. Before the background controller read its triggers
// from the API server, both forged reviews labelled their Namespace.
var _ = Describe("Security: webhook", Label("security"), Ordered, ContinueOnFailure, func() {
	var (
		tenant client.Client
		urs    *updateRequestWatch
	)

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		createNamespaces(ctx, secWebhookCharterNS, secWebhookTenantNS, secWebhookVictimNS)
		tenant = namespaceAdmin(ctx, secWebhookTenant, secWebhookTenantNS)
		urs = watchUpdateRequests(secWebhookCharterNS)
		startCharterWith(ctx, secWebhookCharterNS, "admission,background")
		p := clusterPolicy(secWebhookApprovedLabel)
		createEventually(ctx, suite.client, p)
		// Served once the webhook names ConfigMaps (resourceWebhookURL).
	}, NodeTimeout(5*time.Minute))

	// labelOf is the Namespace's label the attacks try to set.
	labelOf := func(ctx context.Context, g Gomega, namespace string) string {
		ns := &corev1.Namespace{}
		g.Expect(suite.client.Get(ctx, client.ObjectKey{Name: namespace}, ns)).To(Succeed())
		return ns.Labels[secWebhookLabel]
	}
	neverLabelled := func(ctx context.Context, namespace string) {
		GinkgoHelper()
		Consistently(func(g Gomega) string { return labelOf(ctx, g, namespace) }).
			WithTimeout(10*time.Second).WithPolling(time.Second).Should(BeEmpty(), "Namespace %s was labelled", namespace)
	}

	It("a forged review of an object the API server never stored drives no write", func(ctx SpecContext) {
		review := forgedReview("CREATE", &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: secWebhookVictimNS, Name: secWebhookTrigger, UID: uuid.NewUUID()},
			Data:       map[string]string{"approved": "yes"},
		}, nil)
		answer := postReview(ctx, resourceWebhookURL(ctx), review)
		Expect(answer.Allowed).To(BeTrue(), "the webhook answered %+v", answer)
		By("the background controller gets an UpdateRequest of it, and finds no such ConfigMap")
		Eventually(func() []string { return urs.statesOf(secWebhookVictimNS, secWebhookTrigger) }).
			WithTimeout(60*time.Second).WithPolling(time.Second).ShouldNot(BeEmpty(), "an UpdateRequest of the forged review")
		neverLabelled(ctx, secWebhookVictimNS)
		Eventually(func() []string { return urs.statesOf(secWebhookVictimNS, secWebhookTrigger) }).
			WithTimeout(90 * time.Second).WithPolling(time.Second).Should(ContainElement(ContainSubstring("not found")))
	}, SpecTimeout(3*time.Minute))

	It("a forged review of a live object that says otherwise drives no write", func(ctx SpecContext) {
		By("the tenant's own label-request ConfigMap, not approved, made by someone who is no cluster admin")
		live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secWebhookTenantNS, Name: secWebhookTrigger}, Data: map[string]string{"approved": "no"}}
		Expect(tenant.Create(ctx, live)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, live))).To(Succeed()) })
		neverLabelled(ctx, secWebhookTenantNS)

		By("posting the review of an UPDATE of it, approved, by a cluster admin")
		forged := live.DeepCopy()
		forged.Data["approved"] = "yes"
		review := forgedReview("UPDATE", forged, live)
		answer := postReview(ctx, resourceWebhookURL(ctx), review)
		Expect(answer.Allowed).To(BeTrue(), "the webhook answered %+v", answer)
		By("the background controller carries its UpdateRequest out on the live ConfigMap")
		Eventually(func(g Gomega) {
			g.Expect(urs.done(secWebhookTenantNS, secWebhookTrigger)).To(BeTrue(), "UpdateRequests: %q", urs.statesOf(secWebhookTenantNS, secWebhookTrigger))
		}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		neverLabelled(ctx, secWebhookTenantNS)
	}, SpecTimeout(3*time.Minute))
})

// resourceWebhookURL is the URL of charter's fail-closed validating
// webhook for resources that names ConfigMaps, which receives the reviews
// that become UpdateRequests.
func resourceWebhookURL(ctx context.Context) string {
	GinkgoHelper()
	var url string
	Eventually(func(g Gomega) {
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		g.Expect(suite.client.Get(ctx, client.ObjectKey{Name: resourceValidatingName}, &v)).To(Succeed())
		for _, w := range v.Webhooks {
			if w.Name != validateWebhookFail || w.ClientConfig.URL == nil {
				continue
			}
			for _, r := range w.Rules {
				for _, res := range r.Resources {
					if res == "configmaps" || res == "*" {
						url = *w.ClientConfig.URL
					}
				}
			}
		}
		var seen []string
		for _, w := range v.Webhooks {
			for _, r := range w.Rules {
				seen = append(seen, fmt.Sprintf("%s: %v", w.Name, r.Resources))
			}
		}
		var p kyvernov1.ClusterPolicy
		_ = suite.client.Get(ctx, client.ObjectKey{Name: "e2e-sec-webhook-admins-label"}, &p)
		g.Expect(url).NotTo(BeEmpty(), "no %s webhook names configmaps yet: %q; policy status %+v", validateWebhookFail, seen, p.Status)
	}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	return url
}

// review is an AdmissionReview as the attacker writes it.
type review struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Request    map[string]any `json:"request,omitempty"`
	Response   *reviewAnswer  `json:"response,omitempty"`
}

// reviewAnswer is what the webhook answers.
type reviewAnswer struct {
	Allowed bool           `json:"allowed"`
	Status  map[string]any `json:"status,omitempty"`
}

// forgedReview is the review of operation on a ConfigMap (old: its
// previous state, for an UPDATE) by a user claiming system:masters.
func forgedReview(operation string, obj, old *corev1.ConfigMap) review {
	GinkgoHelper()
	asMap := func(cm *corev1.ConfigMap) map[string]any {
		cm = cm.DeepCopy()
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
		Expect(err).NotTo(HaveOccurred())
		return m
	}
	req := map[string]any{
		"uid":       string(uuid.NewUUID()),
		"kind":      map[string]any{"group": "", "version": "v1", "kind": "ConfigMap"},
		"resource":  map[string]any{"group": "", "version": "v1", "resource": "configmaps"},
		"name":      obj.Name,
		"namespace": obj.Namespace,
		"operation": operation,
		"userInfo":  map[string]any{"username": "mallory", "groups": []string{"system:masters", "system:authenticated"}},
		"object":    asMap(obj),
	}
	if old != nil {
		req["oldObject"] = asMap(old)
	}
	return review{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview", Request: req}
}

// postReview posts a review to url as the attacker does, trusting any
// certificate, and returns the answer.
func postReview(ctx context.Context, url string, r review) reviewAnswer {
	GinkgoHelper()
	body, err := json.Marshal(r)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the attacker checks nothing
	}}
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "the webhook answered %s: %s", resp.Status, data)
	var out review
	Expect(json.Unmarshal(data, &out)).To(Succeed())
	Expect(out.Response).NotTo(BeNil(), "no response in %s", data)
	return *out.Response
}

// updateRequestWatch records every UpdateRequest of a namespace as it
// changes, so that one carried out and deleted at once is seen too.
type updateRequestWatch struct {
	mu sync.Mutex
	// byTrigger holds, per trigger namespace/name, the states and
	// messages seen, and whether one of its requests was deleted.
	byTrigger map[string]*requestHistory
}

type requestHistory struct {
	states  []string
	deleted bool
}

// The watch lasts until the spec tree ends, not with the node that starts
// it.
func watchUpdateRequests(namespace string) *updateRequestWatch {
	GinkgoHelper()
	wc, err := client.NewWithWatch(suite.config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	w, err := wc.Watch(ctx, &kyvernov2.UpdateRequestList{}, client.InNamespace(namespace))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	out := &updateRequestWatch{byTrigger: map[string]*requestHistory{}}
	go func() {
		for ev := range w.ResultChan() {
			ur, ok := ev.Object.(*kyvernov2.UpdateRequest)
			if !ok {
				continue
			}
			out.record(ev.Type, ur)
		}
	}()
	return out
}

func (u *updateRequestWatch) record(typ watch.EventType, ur *kyvernov2.UpdateRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	triggers := []kyvernov1.ResourceSpec{ur.Spec.Resource}
	for _, rc := range ur.Spec.RuleContext {
		triggers = append(triggers, rc.Trigger)
	}
	for _, t := range triggers {
		key := t.Namespace + "/" + t.Name
		h := u.byTrigger[key]
		if h == nil {
			h = &requestHistory{}
			u.byTrigger[key] = h
		}
		h.states = append(h.states, fmt.Sprintf("%s %s: %s", typ, ur.Status.State, ur.Status.Message))
		h.deleted = h.deleted || typ == watch.Deleted
	}
}

// statesOf lists what was seen of the UpdateRequests of a trigger.
func (u *updateRequestWatch) statesOf(namespace, name string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if h := u.byTrigger[namespace+"/"+name]; h != nil {
		return append([]string(nil), h.states...)
	}
	return nil
}

// done reports whether an UpdateRequest of the trigger was carried out
// (deleted once completed) or skipped.
func (u *updateRequestWatch) done(namespace, name string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	h := u.byTrigger[namespace+"/"+name]
	if h == nil {
		return false
	}
	if h.deleted {
		return true
	}
	for _, s := range h.states {
		if strings.Contains(s, " "+string(kyvernov2.Skip)+":") {
			return true
		}
	}
	return false
}
