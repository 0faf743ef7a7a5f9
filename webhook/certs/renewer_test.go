package certs

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/charter-dev/charter/webhook/config"
)

const (
	testCASecret  = "charter-svc.charter.svc.charter-tls-ca"
	testTLSSecret = "charter-svc.charter.svc.charter-tls-pair"
	// lag is how late the API server trusts a published caBundle and a
	// replica serves the TLS Secret's certificate, in the simulation.
	// Below PropagationDelay and TrimGrace, as in a cluster.
	lag = 3 * time.Second
	// configResync is the webhook configuration controller's period.
	configResync = 10 * time.Second
	// settle is how long the simulation runs before it checks anything:
	// the first CA and certificate are issued then.
	settle = 30 * time.Second
)

// event changes the world at a moment of the simulation.
type event struct {
	at time.Duration // after settle
	do func(w *world)
}

func deleteSecret(name string) func(w *world) {
	return func(w *world) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testServing.Namespace, Name: name}}
		if err := w.cl.Delete(context.Background(), s); err != nil {
			w.t.Fatalf("deleting Secret %s: %v", name, err)
		}
	}
}

// dropCACopy removes ca.crt from the TLS Secret, as a pair issued before
// charter kept it.
func dropCACopy(w *world) {
	s := w.secret(testTLSSecret)
	delete(s.Data, CAKey)
	if err := w.cl.Update(context.Background(), s); err != nil {
		w.t.Fatal(err)
	}
}

// jump moves the clock forward at once, as if the cluster had run quietly
// meanwhile: no state before the jump is in flight after it.
func jump(d time.Duration) func(w *world) {
	return func(w *world) {
		w.clock = w.clock.Add(d)
		w.history = nil
		w.record()
	}
}

func TestRenewerRotatesWithoutFailingAdmission(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name   string
		events []event
		delay  time.Duration // PropagationDelay; 0 is the default
		// wantNewCA: the final signer is not the first one.
		wantNewCA bool
		// wantUntrusted: the simulation must catch a moment when the API
		// server does not trust what a replica serves (the control).
		wantUntrusted bool
	}{{
		name:      "CA Secret deleted",
		events:    []event{{at: 10 * time.Second, do: deleteSecret(testCASecret)}},
		wantNewCA: true,
	}, {
		name:   "TLS Secret deleted",
		events: []event{{at: 10 * time.Second, do: deleteSecret(testTLSSecret)}},
	}, {
		name: "both Secrets deleted",
		events: []event{{at: 10 * time.Second, do: func(w *world) {
			deleteSecret(testCASecret)(w)
			deleteSecret(testTLSSecret)(w)
		}}},
		wantNewCA: true,
	}, {
		name: "CA Secret deleted, TLS Secret without ca.crt: the CA is recovered from the webhooks",
		events: []event{
			{at: 5 * time.Second, do: dropCACopy},
			{at: 10 * time.Second, do: deleteSecret(testCASecret)},
		},
		wantNewCA: true,
	}, {
		name: "CA Secret deleted again while the first replacement waits",
		events: []event{
			{at: 10 * time.Second, do: deleteSecret(testCASecret)},
			{at: 12 * time.Second, do: deleteSecret(testCASecret)},
		},
		wantNewCA: true,
	}, {
		name: "CA Secret deleted after the serving certificate changed, before the old CA was dropped",
		events: []event{
			{at: 10 * time.Second, do: deleteSecret(testCASecret)},
			{at: 40 * time.Second, do: deleteSecret(testCASecret)},
		},
		wantNewCA: true,
	}, {
		name: "serving certificate and CA renewed in their windows",
		events: []event{
			{at: 10 * time.Second, do: jump(ServingValidity - RenewBefore)},
			{at: 20 * time.Second, do: jump(ServingValidity - RenewBefore)},
			{at: 30 * time.Second, do: jump(CAValidity - RenewBefore - 2*(ServingValidity-RenewBefore) + day)},
		},
		wantNewCA: true,
	}, {
		name:          "control: a certificate served as soon as its CA is published",
		events:        []event{{at: 10 * time.Second, do: deleteSecret(testCASecret)}},
		delay:         time.Nanosecond,
		wantNewCA:     true,
		wantUntrusted: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.delay)
			w.run(settle, nil, false)
			first := w.signer()
			w.run(DefaultTrimGrace+2*time.Minute, tt.events, true)

			if tt.wantUntrusted {
				if len(w.untrusted) == 0 {
					t.Fatal("the control found no moment without trust: the simulation cannot see a hit")
				}
				return
			}
			for _, u := range w.untrusted {
				t.Error(u)
			}
			final := w.signer()
			if got := !final.Equal(first); got != tt.wantNewCA {
				t.Errorf("new CA = %v, want %v", got, tt.wantNewCA)
			}
			// Converged: one CA, everywhere, signing the served certificate.
			ca := w.secret(testCASecret)
			if cs := parseBundle(ca.Data[corev1.TLSCertKey]); len(cs) != 1 {
				t.Errorf("CA bundle holds %d CAs after the grace, want 1", len(cs))
			}
			for i, b := range w.published() {
				if string(b) != string(ca.Data[corev1.TLSCertKey]) {
					t.Errorf("webhook %d does not carry the CA Secret's bundle", i)
				}
			}
			pair := w.secret(testTLSSecret)
			if err := parseBundle(pair.Data[corev1.TLSCertKey])[0].CheckSignatureFrom(final); err != nil {
				t.Errorf("the serving certificate is not signed by the signing CA: %v", err)
			}
			if cs := parseBundle(pair.Data[CAKey]); len(cs) != 1 || !cs[0].Equal(final) {
				t.Error("the TLS Secret's ca.crt is not the signing CA")
			}
			var other admissionregistrationv1.ValidatingWebhookConfiguration
			if err := w.cl.Get(context.Background(), types.NamespacedName{Name: "other"}, &other); err != nil ||
				string(other.Webhooks[0].ClientConfig.CABundle) != "theirs" {
				t.Error("a configuration charter does not manage was touched")
			}
		})
	}
}

func TestRenewerRefusesUnmanagedSecrets(t *testing.T) {
	tests := []struct {
		name   string
		secret string
	}{
		{"CA Secret", testCASecret},
		{"TLS Secret", testTLSSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, 0)
			w.run(settle, nil, false)
			// Someone else's Secret of that name, holding nothing usable.
			deleteSecret(tt.secret)(w)
			foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testServing.Namespace, Name: tt.secret},
				Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: []byte("x"), corev1.TLSPrivateKeyKey: []byte("y")}}
			if err := w.cl.Create(context.Background(), foreign); err != nil {
				t.Fatal(err)
			}
			_, err := w.r.Reconcile(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.secret) || !strings.Contains(err.Error(), "not managed by charter") {
				t.Fatalf("Reconcile = %v, want a refusal naming %s", err, tt.secret)
			}
			if got := w.secret(tt.secret); string(got.Data[corev1.TLSCertKey]) != "x" {
				t.Error("the unmanaged Secret was rewritten")
			}
		})
	}
}

func TestRenewerPublishesAnUnmanagedCAAsItIs(t *testing.T) {
	w := newWorld(t, 0)
	w.run(settle, nil, false)
	// The user takes the CA over, adding a CA of theirs to the bundle.
	_, theirs := mustCA(t, nil, epoch)
	ca := w.secret(testCASecret)
	ca.Labels = nil
	ca.Data[corev1.TLSCertKey] = append(EncodeBundle([]*x509.Certificate{theirs}), ca.Data[corev1.TLSCertKey]...)
	want := string(ca.Data[corev1.TLSCertKey])
	if err := w.cl.Update(context.Background(), ca); err != nil {
		t.Fatal(err)
	}
	w.renewerDue = w.clock
	w.run(DefaultTrimGrace+time.Minute, nil, true)
	for _, u := range w.untrusted {
		t.Error(u)
	}
	// The Renewer alone, last, must agree with the configuration
	// controller, or the two would take turns.
	if _, err := w.r.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := string(w.secret(testCASecret).Data[corev1.TLSCertKey]); got != want {
		t.Error("charter rewrote a CA Secret it does not manage")
	}
	for i, b := range w.published() {
		if string(b) != want {
			t.Errorf("webhook %d does not carry the unmanaged CA Secret's bundle", i)
		}
	}
}

// world is a cluster reduced to what certificate rotation touches: the
// two Secrets and the webhook configurations in a fake API server, the
// Renewer on a fake clock, the configuration controller's caBundle
// writes, and a record of what was served and published when, from which
// the API server's and the replicas' late views are checked.
type world struct {
	t     *testing.T
	cl    client.Client
	r     *Renewer
	clock time.Time

	renewerDue, configDue time.Time
	configPending         bool
	history               []snapshot
	untrusted             []string
	verified              map[verification]error
}

// snapshot is what was served and published from a moment on.
type snapshot struct {
	at        time.Time
	leaf      *x509.Certificate // the TLS Secret's; the last one while it is gone
	published [][]byte
}

func newWorld(t *testing.T, delay time.Duration) *world {
	w := &world{t: t, clock: epoch, verified: map[verification]error{}}
	labels := map[string]string{config.ManagedByLabel: config.ManagedByValue}
	url := "https://127.0.0.1:9443/validate"
	cc := admissionregistrationv1.WebhookClientConfig{URL: &url}
	w.cl = fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "charter-resource-validating-webhook-cfg", Labels: labels},
			Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "validate-fail", ClientConfig: cc}, {Name: "validate-ignore", ClientConfig: cc}},
		},
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "charter-resource-mutating-webhook-cfg", Labels: labels},
			Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "mutate-fail", ClientConfig: cc}},
		},
		// Someone else's configuration: never touched.
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "other"},
			Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "other", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte("theirs")}}},
		},
	).Build()
	w.r = &Renewer{
		Client: w.cl, Namespace: testServing.Namespace, CASecret: testCASecret, TLSSecret: testTLSSecret,
		Serving: testServing, PropagationDelay: delay, Log: logr.Discard(),
		OnChange: func() { w.configPending = true },
		now:      func() time.Time { return w.clock },
	}
	return w
}

// run advances the clock second by second for d, applying the events,
// running the Renewer when it asked to, when a Secret changed, and the
// configuration controller every configResync, and checks trust when
// check is set.
func (w *world) run(d time.Duration, events []event, check bool) {
	ctx := context.Background()
	for tick := time.Second; tick <= d; tick += time.Second {
		w.clock = w.clock.Add(time.Second)
		for _, e := range events {
			if e.at == tick {
				e.do(w)
				w.renewerDue = w.clock // the Secret watch triggers it
			}
		}
		if !w.clock.Before(w.renewerDue) {
			next, err := w.r.Reconcile(ctx)
			if err != nil {
				w.t.Fatalf("at %s: Reconcile: %v", w.elapsed(), err)
			}
			if next <= 0 {
				next = DefaultInterval
			}
			w.renewerDue = w.clock.Add(next)
			if w.configPending {
				w.renewerDue = w.clock.Add(time.Second) // its own writes trigger it again
			}
		}
		if w.configPending || !w.clock.Before(w.configDue) {
			w.configController()
			w.configPending = false
			w.configDue = w.clock.Add(configResync)
		}
		w.record()
		if check {
			w.check()
		}
	}
}

// configController writes the CA Secret's bundle to the webhooks, as
// config.Controller does through certs.CABundle; without a CA Secret it
// writes nothing.
func (w *world) configController() {
	bundle, err := CABundle(context.Background(), w.cl, testServing.Namespace, testCASecret)
	if err != nil {
		return
	}
	if err := (config.CABundles{Client: w.cl}).Publish(context.Background(), bundle); err != nil {
		w.t.Fatalf("at %s: publishing: %v", w.elapsed(), err)
	}
}

func (w *world) record() {
	s := snapshot{at: w.clock, published: w.published()}
	var pair corev1.Secret
	if err := w.cl.Get(context.Background(), types.NamespacedName{Namespace: testServing.Namespace, Name: testTLSSecret}, &pair); err == nil {
		if leafs := parseBundle(pair.Data[corev1.TLSCertKey]); len(leafs) > 0 {
			s.leaf = leafs[0]
		}
	}
	if s.leaf == nil && len(w.history) > 0 {
		s.leaf = w.history[len(w.history)-1].leaf // replicas keep serving the last one
	}
	w.history = append(w.history, s)
}

// check verifies that, for any view of the last lag a replica or the API
// server may still hold, every webhook's caBundle trusts the certificate
// served.
func (w *world) check() {
	var views []snapshot
	for i := len(w.history) - 1; i >= 0; i-- {
		views = append(views, w.history[i])
		if !w.history[i].at.After(w.clock.Add(-lag)) {
			break
		}
	}
	for _, served := range views {
		for _, trusted := range views {
			for i, bundle := range trusted.published {
				if served.leaf == nil {
					w.untrusted = append(w.untrusted, fmt.Sprintf("at %s: no certificate served", w.elapsed()))
					continue
				}
				if err := w.verify(served.leaf, bundle); err != nil {
					w.untrusted = append(w.untrusted, fmt.Sprintf("at %s: the certificate served since %s is not trusted by webhook %d's caBundle published since %s: %v",
						w.elapsed(), served.at.Sub(epoch), i, trusted.at.Sub(epoch), err))
				}
			}
		}
	}
}

// verify is Verify, remembered per certificate, bundle and hour: the
// same few pairs are checked every second, and only their validity
// periods depend on the clock, which are days long.
func (w *world) verify(leaf *x509.Certificate, bundle []byte) error {
	key := verification{string(leaf.Raw), string(bundle), w.clock.Truncate(time.Hour)}
	if err, ok := w.verified[key]; ok {
		return err
	}
	err := Verify(leaf, bundle, testServing, w.clock)
	w.verified[key] = err
	return err
}

type verification struct {
	leaf, bundle string
	hour         time.Time
}

func (w *world) elapsed() time.Duration { return w.clock.Sub(epoch) }

func (w *world) published() [][]byte {
	b, err := (config.CABundles{Client: w.cl}).Published(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

func (w *world) secret(name string) *corev1.Secret {
	var s corev1.Secret
	if err := w.cl.Get(context.Background(), types.NamespacedName{Namespace: testServing.Namespace, Name: name}, &s); err != nil {
		w.t.Fatalf("Secret %s: %v", name, err)
	}
	return &s
}

// signer is the CA Secret's signing CA.
func (w *world) signer() *x509.Certificate {
	s := w.secret(testCASecret)
	key, err := parseKey(s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		w.t.Fatal(err)
	}
	ca := SigningCA(parseBundle(s.Data[corev1.TLSCertKey]), key)
	if ca == nil {
		w.t.Fatal("the CA Secret holds no CA of its key")
	}
	return ca
}
