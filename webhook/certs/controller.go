package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/webhook/config"
)

// ManagedByLabel marks the Secrets charter issues; charter never renews a
// Secret without it.
const (
	ManagedByLabel  = "charter.dev/managed-by"
	ManagedByValue  = "charter"
	DefaultInterval = 12 * time.Hour
	// DefaultPropagationDelay is how long the API server is given to
	// trust a newly published CA before a certificate it signed is
	// served: its webhook configuration informer takes well under that.
	DefaultPropagationDelay = 5 * time.Second
	// DefaultTrimGrace is how long older CAs stay trusted after the
	// serving certificate changed: every replica reads the new one
	// through its informer long before.
	DefaultTrimGrace = 5 * time.Minute
	// CAKey is the TLS Secret's copy of the CA that signed its
	// certificate (the kubernetes.io/tls convention), from which the
	// bundle recovers it when the CA Secret is deleted.
	CAKey = "ca.crt"
	// retryAfterError is the pause after a failed check.
	retryAfterError = 10 * time.Second
)

// SecretNames returns the CA and TLS Secret names for a service,
// "<svc>.<ns>.svc.charter-tls-ca" and "...-pair".
func SecretNames(service, namespace string) (ca, pair string) {
	base := service + "." + namespace + ".svc.charter-tls"
	return base + "-ca", base + "-pair"
}

// BundlePublisher reads and writes the caBundle of the webhook
// configurations, which is what the API server trusts.
type BundlePublisher interface {
	// Published returns every webhook's caBundle; none when there is no
	// configuration yet.
	Published(ctx context.Context) ([][]byte, error)
	// Publish sets every webhook's caBundle.
	Publish(ctx context.Context, bundle []byte) error
}

// Renewer issues and renews the CA and serving certificate Secrets, and
// publishes the CA bundle to the webhook configurations in the order that
// keeps every admission call trusted (bundle.go). It runs on the leader;
// the result is the same whoever writes it, and a conflicting write is
// retried on the next round.
type Renewer struct {
	Client    client.Client
	Namespace string
	CASecret  string
	TLSSecret string
	Serving   Serving
	// Bundles publishes the caBundle; nil means charter's webhook
	// configurations through Client.
	Bundles BundlePublisher
	// Interval between checks (default 12 h). Trigger forces one.
	Interval time.Duration
	// PropagationDelay (default 5 s) and TrimGrace (default 5 min): see
	// the constants.
	PropagationDelay time.Duration
	TrimGrace        time.Duration
	// OnChange is called after either Secret was written (the webhook
	// configuration controller refreshes the caBundle).
	OnChange func()
	Log      logr.Logger
	now      func() time.Time

	once    sync.Once
	trigger chan struct{}
	// trustedSince is when every published caBundle was first seen to
	// hold a CA (by its DER), so a certificate it signs is served only
	// once the API server had time to trust it. In memory: a new leader
	// waits once more, which is harmless.
	trustedSince map[string]time.Time
}

func (r *Renewer) init() {
	r.once.Do(func() {
		r.trigger = make(chan struct{}, 1)
		r.trustedSince = map[string]time.Time{}
		if r.now == nil {
			r.now = time.Now
		}
		if r.Bundles == nil {
			r.Bundles = config.CABundles{Client: r.Client}
		}
		if r.PropagationDelay <= 0 {
			r.PropagationDelay = DefaultPropagationDelay
		}
		if r.TrimGrace <= 0 {
			r.TrimGrace = DefaultTrimGrace
		}
	})
}

// Trigger asks for a check soon (a Secret changed).
func (r *Renewer) Trigger() {
	r.init()
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// NeedLeaderElection is true.
func (r *Renewer) NeedLeaderElection() bool { return true }

// Start checks the Secrets now, on every trigger, every Interval, and
// whenever a rotation asks to continue sooner.
func (r *Renewer) Start(ctx context.Context) error {
	r.init()
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-retry.C:
		case <-r.trigger:
		}
		next, err := r.Reconcile(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.Log.Error(err, "certificates: renewal failed; retrying")
			next = retryAfterError
		case next <= 0 || next > interval:
			next = interval
		}
		if !retry.Stop() {
			select {
			case <-retry.C:
			default:
			}
		}
		retry.Reset(next)
	}
}

// Reconcile takes the next step towards a valid CA and a serving
// certificate signed by it, both outside the renewal window, with the
// published caBundle trusting every certificate served meanwhile. It
// returns when to check again if a step is pending (0 when none is).
func (r *Renewer) Reconcile(ctx context.Context) (time.Duration, error) {
	r.init()
	now := r.now()
	caSecret, err := r.get(ctx, r.CASecret)
	if err != nil {
		return 0, err
	}
	pairSecret, err := r.get(ctx, r.TLSSecret)
	if err != nil {
		return 0, err
	}
	published, err := r.Bundles.Published(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the published CA bundle: %w", err)
	}

	// 1. The signing CA: the newest of the CA Secret whose key it holds.
	var caBundle, caKeyPEM []byte
	if caSecret != nil {
		caBundle, caKeyPEM = caSecret.Data[corev1.TLSCertKey], caSecret.Data[corev1.TLSPrivateKeyKey]
	}
	known := parseBundle(caBundle)
	var signer *x509.Certificate
	caKey, keyErr := parseKey(caKeyPEM)
	if keyErr == nil {
		signer = SigningCA(known, caKey)
	}
	renewCA := CANeedsRenewal(signer, now)
	if renewCA {
		if caSecret != nil && !managed(caSecret) {
			return 0, fmt.Errorf("CA Secret %s/%s is not valid but is not managed by charter: it will not be renewed", r.Namespace, r.CASecret)
		}
		var reuse []byte
		if keyErr == nil {
			reuse = caKeyPEM // as Kyverno: certificates it signed keep verifying
		}
		fresh, err := NewCA(r.Namespace, reuse, now)
		if err != nil {
			return 0, err
		}
		signer, caKeyPEM = parseBundle(fresh.CertPEM)[0], fresh.KeyPEM
	}

	// 2. The bundle: every CA that may still sign a served certificate,
	// wherever it is still found.
	var served *x509.Certificate
	if pairSecret != nil {
		if leafs := parseBundle(pairSecret.Data[corev1.TLSCertKey]); len(leafs) > 0 {
			served = leafs[0]
		}
		known = append(known, parseBundle(pairSecret.Data[CAKey])...)
	}
	for _, b := range published {
		known = append(known, parseBundle(b)...)
	}
	cas, trimAt := PlanBundle(signer, known, served, now, r.TrimGrace)
	bundle := EncodeBundle(cas)
	if !renewCA && !managed(caSecret) {
		// Someone else's valid CA: published as they keep it, which is
		// also what the configuration controller publishes.
		bundle, cas, trimAt = caBundle, parseBundle(caBundle), time.Time{}
	}
	// OnChange follows any write, even when a later step fails.
	wrote := false
	defer func() {
		if wrote && r.OnChange != nil {
			r.OnChange()
		}
	}()
	if renewCA || (managed(caSecret) && !bytes.Equal(bundle, caBundle)) {
		if err := r.put(ctx, caSecret, r.CASecret, map[string][]byte{corev1.TLSCertKey: bundle, corev1.TLSPrivateKeyKey: caKeyPEM}); err != nil {
			return 0, err
		}
		r.Log.Info("certificates: wrote CA bundle", "secret", r.CASecret, "cas", len(cas), "newCA", renewCA)
		wrote = true
	}

	// 3. Publish it before any certificate signed by the new CA is served.
	fingerprint := string(signer.Raw)
	if !Trusts(published, signer) {
		delete(r.trustedSince, fingerprint)
	}
	if !allEqual(published, bundle) {
		if err := r.Bundles.Publish(ctx, bundle); err != nil {
			return 0, err
		}
		r.Log.Info("certificates: published CA bundle to the webhook configurations", "cas", len(cas))
	}
	if _, ok := r.trustedSince[fingerprint]; !ok {
		r.trustedSince[fingerprint] = now
		if len(published) == 0 {
			// Nothing calls charter yet: no one to wait for.
			r.trustedSince[fingerprint] = now.Add(-r.PropagationDelay)
		}
	}

	// 4. The serving certificate, signed by the signing CA alone, so the
	// others can go (under someone else's CA, by any CA of theirs).
	signerPEM := EncodeBundle([]*x509.Certificate{signer})
	servingCAs := signerPEM
	if !renewCA && !managed(caSecret) {
		servingCAs = caBundle
	}
	pair := KeyPair{}
	if pairSecret != nil {
		pair = KeyPair{CertPEM: pairSecret.Data[corev1.TLSCertKey], KeyPEM: pairSecret.Data[corev1.TLSPrivateKeyKey]}
	}
	var next time.Duration
	if pairSecret == nil || ServingNeedsRenewal(pair, servingCAs, r.Serving, now) {
		if pairSecret != nil && !managed(pairSecret) {
			return 0, fmt.Errorf("TLS Secret %s/%s is not valid but is not managed by charter: it will not be renewed", r.Namespace, r.TLSSecret)
		}
		if wait := r.trustedSince[fingerprint].Add(r.PropagationDelay).Sub(now); wait > 0 {
			r.Log.Info("certificates: waiting for the API server to trust the new CA before serving a certificate it signed", "wait", wait)
			return wait, nil
		}
		fresh, err := NewServing(KeyPair{CertPEM: signerPEM, KeyPEM: caKeyPEM}, r.Serving, now)
		if err != nil {
			return 0, err
		}
		data := map[string][]byte{corev1.TLSCertKey: fresh.CertPEM, corev1.TLSPrivateKeyKey: fresh.KeyPEM, CAKey: signerPEM}
		if err := r.put(ctx, pairSecret, r.TLSSecret, data); err != nil {
			return 0, err
		}
		r.Log.Info("certificates: issued serving certificate", "secret", r.TLSSecret)
		wrote = true
		if len(cas) > 1 {
			next = r.TrimGrace // then the older CAs go
		}
	} else if !trimAt.IsZero() {
		next = trimAt.Sub(now)
	}
	return next, nil
}

func managed(s *corev1.Secret) bool { return s != nil && s.Labels[ManagedByLabel] == ManagedByValue }

func allEqual(bundles [][]byte, want []byte) bool {
	for _, b := range bundles {
		if !bytes.Equal(b, want) {
			return false
		}
	}
	return true
}

func (r *Renewer) get(ctx context.Context, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", r.Namespace, name, err)
	}
	return &s, nil
}

func (r *Renewer) put(ctx context.Context, current *corev1.Secret, name string, data map[string][]byte) error {
	if current == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: name, Labels: map[string]string{ManagedByLabel: ManagedByValue}},
			Type:       corev1.SecretTypeTLS,
			Data:       data,
		}
		if err := r.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", r.Namespace, name, err)
		}
		return nil
	}
	current.Data = data
	if err := r.Client.Update(ctx, current); err != nil {
		return fmt.Errorf("updating Secret %s/%s: %w", r.Namespace, name, err)
	}
	return nil
}

// SecretKeyPair serves the certificate the TLS Secret holds now. Every
// replica uses it; reads go through the informer cache, and the parsed
// pair is reused until the Secret's resourceVersion changes.
type SecretKeyPair struct {
	Reader          client.Reader
	Namespace, Name string

	mu      sync.Mutex
	version string
	cert    *tls.Certificate
}

// GetCertificate is a tls.Config.GetCertificate.
func (k *SecretKeyPair) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	ctx := context.Background()
	if hello != nil {
		ctx = hello.Context()
	}
	return k.current(ctx)
}

func (k *SecretKeyPair) current(ctx context.Context) (*tls.Certificate, error) {
	var s corev1.Secret
	err := k.Reader.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: k.Name}, &s)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		if k.cert != nil {
			return k.cert, nil // keep serving the last good pair
		}
		return nil, fmt.Errorf("serving certificate Secret %s/%s: %w", k.Namespace, k.Name, err)
	}
	if s.ResourceVersion == k.version && k.cert != nil {
		return k.cert, nil
	}
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, fmt.Errorf("serving certificate Secret %s/%s: %w", k.Namespace, k.Name, err)
	}
	k.cert, k.version = &pair, s.ResourceVersion
	return k.cert, nil
}

// Ready reports whether a serving certificate is available.
func (k *SecretKeyPair) Ready(ctx context.Context) error {
	_, err := k.current(ctx)
	return err
}

// CABundle returns the CA Secret's tls.crt, the caBundle webhooks carry.
func CABundle(ctx context.Context, reader client.Reader, namespace, name string) ([]byte, error) {
	var s corev1.Secret
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("CA Secret %s/%s: %w", namespace, name, err)
	}
	bundle := s.Data[corev1.TLSCertKey]
	if len(bundle) == 0 {
		return nil, errors.New("CA Secret " + namespace + "/" + name + " has no tls.crt")
	}
	return bundle, nil
}
