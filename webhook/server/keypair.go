package server

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// KeyPairFiles serves a certificate from PEM files, re-reading them when
// either file changes (checked at most once per interval, on handshake),
// so a rotated certificate is picked up without a restart. A failed reload
// keeps the last good pair.
type KeyPairFiles struct {
	certFile, keyFile string
	interval          time.Duration

	mu        sync.Mutex
	cert      *tls.Certificate
	certMod   time.Time
	keyMod    time.Time
	checkedAt time.Time
	now       func() time.Time
}

// NewKeyPairFiles loads the pair once and fails when it cannot.
func NewKeyPairFiles(certFile, keyFile string, interval time.Duration) (*KeyPairFiles, error) {
	k := &KeyPairFiles{certFile: certFile, keyFile: keyFile, interval: interval, now: time.Now}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// GetCertificate is a tls.Config.GetCertificate.
func (k *KeyPairFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now := k.now(); now.Sub(k.checkedAt) >= k.interval {
		k.checkedAt = now
		if changed, err := k.changed(); err == nil && changed {
			_ = k.reloadLocked()
		}
	}
	return k.cert, nil
}

func (k *KeyPairFiles) changed() (bool, error) {
	c, err := os.Stat(k.certFile)
	if err != nil {
		return false, err
	}
	key, err := os.Stat(k.keyFile)
	if err != nil {
		return false, err
	}
	return !c.ModTime().Equal(k.certMod) || !key.ModTime().Equal(k.keyMod), nil
}

func (k *KeyPairFiles) reload() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reloadLocked()
}

func (k *KeyPairFiles) reloadLocked() error {
	c, err := os.Stat(k.certFile)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	key, err := os.Stat(k.keyFile)
	if err != nil {
		return fmt.Errorf("serving key: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("serving certificate %s / key %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.certMod, k.keyMod = &pair, c.ModTime(), key.ModTime()
	return nil
}
