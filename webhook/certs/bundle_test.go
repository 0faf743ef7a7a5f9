package certs

import (
	"crypto/x509"
	"testing"
	"time"
)

var (
	testServing = Serving{Service: "charter-svc", Namespace: "charter", Hosts: []string{"127.0.0.1"}}
	epoch       = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
)

func mustCA(t *testing.T, key []byte, at time.Time) (KeyPair, *x509.Certificate) {
	t.Helper()
	ca, err := NewCA(testServing.Namespace, key, at)
	if err != nil {
		t.Fatal(err)
	}
	return ca, parseBundle(ca.CertPEM)[0]
}

func mustLeaf(t *testing.T, ca KeyPair, at time.Time) *x509.Certificate {
	t.Helper()
	pair, err := NewServing(ca, testServing, at)
	if err != nil {
		t.Fatal(err)
	}
	return parseBundle(pair.CertPEM)[0]
}

func TestPlanBundle(t *testing.T) {
	const grace = 5 * time.Minute
	oldPair, oldCA := mustCA(t, nil, epoch)
	newPair, newCA := mustCA(t, nil, epoch.Add(24*time.Hour))
	_, expiredCA := mustCA(t, nil, epoch.Add(-CAValidity-time.Hour))
	renewedAt := epoch.Add(CAValidity - RenewBefore)
	_, renewedCA := mustCA(t, oldPair.KeyPEM, renewedAt) // same key as oldCA

	rotatedAt := epoch.Add(24*time.Hour + time.Minute)
	leafOld := mustLeaf(t, oldPair, epoch)
	leafNew := mustLeaf(t, newPair, rotatedAt)

	tests := []struct {
		name       string
		signer     *x509.Certificate
		known      []*x509.Certificate
		served     *x509.Certificate
		now        time.Time
		want       []*x509.Certificate
		wantTrimAt time.Time
	}{{
		name: "first CA", signer: oldCA, now: epoch,
		want: []*x509.Certificate{oldCA},
	}, {
		name: "the signer found again is not repeated", signer: oldCA, known: []*x509.Certificate{oldCA, oldCA}, served: leafOld, now: epoch,
		want: []*x509.Certificate{oldCA},
	}, {
		name: "CA Secret deleted: the CA of the served certificate stays", signer: newCA, known: []*x509.Certificate{oldCA},
		served: leafOld, now: rotatedAt.Add(-time.Second),
		want: []*x509.Certificate{oldCA, newCA},
	}, {
		name: "both Secrets deleted: every CA still published stays", signer: newCA, known: []*x509.Certificate{oldCA, oldCA},
		served: nil, now: rotatedAt.Add(time.Hour),
		want: []*x509.Certificate{oldCA, newCA},
	}, {
		name: "serving certificate just reissued: the old CA stays for the grace", signer: newCA, known: []*x509.Certificate{newCA, oldCA},
		served: leafNew, now: rotatedAt.Add(grace - time.Second),
		want: []*x509.Certificate{oldCA, newCA}, wantTrimAt: rotatedAt.Add(grace),
	}, {
		name: "grace over: the old CA goes", signer: newCA, known: []*x509.Certificate{oldCA, newCA},
		served: leafNew, now: rotatedAt.Add(grace),
		want: []*x509.Certificate{newCA},
	}, {
		name: "expired CAs go at once", signer: newCA, known: []*x509.Certificate{expiredCA, oldCA},
		served: leafOld, now: rotatedAt,
		want: []*x509.Certificate{oldCA, newCA},
	}, {
		name:   "renewal with the same key: the old certificate is already the signer's, the old CA goes after the grace",
		signer: renewedCA, known: []*x509.Certificate{oldCA}, served: mustLeaf(t, oldPair, renewedAt.Add(-time.Minute)),
		now: renewedAt, want: []*x509.Certificate{oldCA, renewedCA}, wantTrimAt: renewedAt.Add(-time.Minute + grace),
	}, {
		name: "served by a CA found nowhere: the known CAs stay", signer: newCA, known: []*x509.Certificate{expiredCA},
		served: leafOld, now: rotatedAt,
		want: []*x509.Certificate{newCA},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, trimAt := PlanBundle(tt.signer, tt.known, tt.served, tt.now, grace)
			if !sameCerts(got, tt.want) {
				t.Errorf("bundle = %s, want %s", names(got, oldCA, newCA, renewedCA), names(tt.want, oldCA, newCA, renewedCA))
			}
			if !trimAt.Equal(tt.wantTrimAt) {
				t.Errorf("trimAt = %v, want %v", trimAt, tt.wantTrimAt)
			}
		})
	}
}

func TestSigningCAAndTrusts(t *testing.T) {
	oldPair, oldCA := mustCA(t, nil, epoch)
	_, otherCA := mustCA(t, nil, epoch)
	_, renewedCA := mustCA(t, oldPair.KeyPEM, epoch.Add(time.Hour))
	key, err := parseKey(oldPair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got := SigningCA([]*x509.Certificate{oldCA, renewedCA, otherCA}, key); !got.Equal(renewedCA) {
		t.Error("SigningCA did not pick the newest CA of the key")
	}
	if got := SigningCA([]*x509.Certificate{otherCA}, key); got != nil {
		t.Error("SigningCA picked a CA of another key")
	}

	both := EncodeBundle([]*x509.Certificate{oldCA, otherCA})
	tests := []struct {
		name    string
		bundles [][]byte
		ca      *x509.Certificate
		want    bool
	}{
		{"no configuration", nil, otherCA, true},
		{"every webhook holds it", [][]byte{both, both}, otherCA, true},
		{"one webhook lacks it", [][]byte{both, EncodeBundle([]*x509.Certificate{oldCA})}, otherCA, false},
		{"an empty caBundle", [][]byte{both, nil}, oldCA, false},
		{"a corrupt caBundle", [][]byte{[]byte("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")}, oldCA, false},
	}
	for _, tt := range tests {
		if got := Trusts(tt.bundles, tt.ca); got != tt.want {
			t.Errorf("%s: Trusts = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func sameCerts(a, b []*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// names spells a bundle with the CAs' names in the test, for messages.
func names(cs []*x509.Certificate, oldCA, newCA, renewedCA *x509.Certificate) []string {
	var out []string
	for _, c := range cs {
		switch {
		case c.Equal(oldCA):
			out = append(out, "old")
		case c.Equal(newCA):
			out = append(out, "new")
		case c.Equal(renewedCA):
			out = append(out, "renewed")
		default:
			out = append(out, c.NotAfter.Format(time.DateOnly))
		}
	}
	return out
}
