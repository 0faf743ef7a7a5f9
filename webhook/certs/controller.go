package certs

import (
	"context"
	"crypto/tls"
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
)

// ManagedByLabel marks the Secrets charter issues; charter never renews a
// Secret without it.
const (
	ManagedByLabel  = "charter.dev/managed-by"
	ManagedByValue  = "charter"
	DefaultInterval = 12 * time.Hour
)

// SecretNames returns the CA and TLS Secret names for a service,
// "<svc>.<ns>.svc.charter-tls-ca" and "...-pair".
func SecretNames(service, namespace string) (ca, pair string) {
	base := service + "." + namespace + ".svc.charter-tls"
	return base + "-ca", base + "-pair"
}

// Renewer issues and renews the CA and serving certificate Secrets. It
// runs on the leader; the result is the same whoever writes it, and a
// conflicting write is retried on the next round.
type Renewer struct {
	Client    client.Client
	Namespace string
	CASecret  string
	TLSSecret string
	Serving   Serving
	// Interval between checks (default 12 h). Trigger forces one.
	Interval time.Duration
	// OnChange is called after either Secret was written (the webhook
	// configuration controller refreshes the caBundle).
	OnChange func()
	Log      logr.Logger
	now      func() time.Time

	once    sync.Once
	trigger chan struct{}
}

func (r *Renewer) init() {
	r.once.Do(func() {
		r.trigger = make(chan struct{}, 1)
		if r.now == nil {
			r.now = time.Now
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

// Start checks the Secrets now, on every trigger and every Interval.
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
		next := interval
		if err := r.Reconcile(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error(err, "certificates: renewal failed; retrying")
			next = 10 * time.Second
		}
		retry.Reset(next)
	}
}

// Reconcile makes sure a valid CA and a serving certificate signed by it,
// both outside the renewal window, are stored.
func (r *Renewer) Reconcile(ctx context.Context) error {
	r.init()
	now := r.now()
	caSecret, err := r.get(ctx, r.CASecret)
	if err != nil {
		return err
	}
	ca := KeyPair{}
	if caSecret != nil {
		ca = KeyPair{CertPEM: caSecret.Data[corev1.TLSCertKey], KeyPEM: caSecret.Data[corev1.TLSPrivateKeyKey]}
	}
	wrote := false
	if caSecret == nil || CANeedsRenewal(ca.CertPEM, now) || ca.KeyPEM == nil {
		if caSecret != nil && caSecret.Labels[ManagedByLabel] != ManagedByValue {
			return fmt.Errorf("CA Secret %s/%s is not valid but is not managed by charter: it will not be renewed", r.Namespace, r.CASecret)
		}
		var key []byte
		if _, err := parseKey(ca.KeyPEM); err == nil {
			key = ca.KeyPEM
		}
		fresh, err := NewCA(r.Namespace, key, now)
		if err != nil {
			return err
		}
		ca = KeyPair{CertPEM: TrimBundle(ca.CertPEM, fresh.CertPEM, now), KeyPEM: fresh.KeyPEM}
		if err := r.put(ctx, caSecret, r.CASecret, ca); err != nil {
			return err
		}
		r.Log.Info("certificates: issued CA", "secret", r.CASecret)
		wrote = true
	}
	pairSecret, err := r.get(ctx, r.TLSSecret)
	if err != nil {
		return err
	}
	pair := KeyPair{}
	if pairSecret != nil {
		pair = KeyPair{CertPEM: pairSecret.Data[corev1.TLSCertKey], KeyPEM: pairSecret.Data[corev1.TLSPrivateKeyKey]}
	}
	if pairSecret == nil || ServingNeedsRenewal(pair, ca.CertPEM, r.Serving, now) {
		if pairSecret != nil && pairSecret.Labels[ManagedByLabel] != ManagedByValue {
			return fmt.Errorf("TLS Secret %s/%s is not valid but is not managed by charter: it will not be renewed", r.Namespace, r.TLSSecret)
		}
		fresh, err := NewServing(ca, r.Serving, now)
		if err != nil {
			return err
		}
		if err := r.put(ctx, pairSecret, r.TLSSecret, fresh); err != nil {
			return err
		}
		r.Log.Info("certificates: issued serving certificate", "secret", r.TLSSecret)
		wrote = true
	}
	if wrote && r.OnChange != nil {
		r.OnChange()
	}
	return nil
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

func (r *Renewer) put(ctx context.Context, current *corev1.Secret, name string, kp KeyPair) error {
	data := map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM}
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
