package certs

import (
	"bytes"
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

func TestIssueAndRenewal(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Serving{Service: "charter", Namespace: "charter-system", Hosts: []string{"127.0.0.1", "webhook.local"}}
	ca, err := NewCA(s.Namespace, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	cas, _ := ca.Certificates()
	if !cas[0].IsCA || cas[0].Subject.CommonName != "*.charter-system.svc" || cas[0].NotAfter.Sub(now) != CAValidity {
		t.Errorf("CA: IsCA %v CN %q validity %v", cas[0].IsCA, cas[0].Subject.CommonName, cas[0].NotAfter.Sub(now))
	}
	pair, err := NewServing(ca, s, now)
	if err != nil {
		t.Fatal(err)
	}
	leafs, _ := pair.Certificates()
	if got := leafs[0].NotAfter.Sub(now); got != ServingValidity {
		t.Errorf("serving validity = %v", got)
	}
	if err := Verify(leafs[0], ca.CertPEM, s, now); err != nil {
		t.Errorf("serving certificate does not verify: %v", err)
	}

	tests := []struct {
		name        string
		at          time.Time
		wantCA      bool
		wantServing bool
	}{
		{"fresh", now, false, false},
		{"outside the window", now.Add(ServingValidity - RenewBefore - time.Hour), false, false},
		{"serving inside the window", now.Add(ServingValidity - RenewBefore + time.Hour), false, true},
		{"CA inside the window", now.Add(CAValidity - RenewBefore + time.Hour), true, true},
	}
	for _, tt := range tests {
		if got := CANeedsRenewal(cas[0], tt.at); got != tt.wantCA {
			t.Errorf("%s: CANeedsRenewal = %v", tt.name, got)
		}
		if got := ServingNeedsRenewal(pair, ca.CertPEM, s, tt.at); got != tt.wantServing {
			t.Errorf("%s: ServingNeedsRenewal = %v", tt.name, got)
		}
	}

	// A pair from another CA, or missing a host, needs renewal.
	other, _ := NewCA(s.Namespace, nil, now)
	if !ServingNeedsRenewal(pair, other.CertPEM, s, now) {
		t.Error("a pair signed by another CA does not need renewal")
	}
	if !ServingNeedsRenewal(pair, ca.CertPEM, Serving{Service: "charter", Namespace: "charter-system", Hosts: []string{"10.0.0.9"}}, now) {
		t.Error("a pair missing a host does not need renewal")
	}

	// Renewing the CA reuses its key, so the serving certificate the old
	// CA signed verifies against the new one alone.
	renewedAt := now.Add(CAValidity - RenewBefore + time.Hour)
	ca2, err := NewCA(s.Namespace, ca.KeyPEM, renewedAt)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca2.KeyPEM, ca.KeyPEM) {
		t.Error("CA renewal changed the key")
	}
	late, err := NewServing(ca, s, renewedAt.Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lateLeafs, _ := late.Certificates()
	if err := Verify(lateLeafs[0], ca2.CertPEM, s, renewedAt); err != nil {
		t.Errorf("the old serving certificate does not verify against the renewed CA: %v", err)
	}
	pair2, err := NewServing(ca2, s, renewedAt)
	if err != nil {
		t.Fatal(err)
	}
	leafs2, _ := pair2.Certificates()
	if leafs2[0].NotAfter.After(mustNewest(t, ca2.CertPEM).NotAfter) {
		t.Error("serving certificate outlives its CA")
	}
}

func mustNewest(t *testing.T, bundle []byte) *x509.Certificate {
	cs, err := ParseCertificates(bundle)
	if err != nil {
		t.Fatal(err)
	}
	return newest(cs)
}

// Out of cluster, the host of --webhook-url is whatever address the API
// server reaches charter at: loopback for a local API server, a Docker
// bridge's gateway for kind. Any IP must become an IP SAN (an API server
// checks a URL's IP host against those alone), and a name a DNS SAN.
func TestServingHosts(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA("charter", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host   string
		wantIP bool
	}{
		{"127.0.0.1", true},
		{"172.18.0.1", true},
		{"192.168.49.1", true},
		{"fc00:f853:ccd:e793::1", true},
		{"host.docker.internal", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			s := Serving{Service: "charter-svc", Namespace: "charter", Hosts: []string{tt.host}}
			pair, err := NewServing(ca, s, now)
			if err != nil {
				t.Fatal(err)
			}
			leafs, err := pair.Certificates()
			if err != nil {
				t.Fatal(err)
			}
			leaf := leafs[0]
			var ips []string
			for _, ip := range leaf.IPAddresses {
				ips = append(ips, ip.String())
			}
			if gotIP := slices.Contains(ips, tt.host); gotIP != tt.wantIP {
				t.Errorf("IP SANs %v: contains %s = %v, want %v", ips, tt.host, gotIP, tt.wantIP)
			}
			if gotDNS := slices.Contains(leaf.DNSNames, tt.host); gotDNS == tt.wantIP {
				t.Errorf("DNS SANs %v: contains %s = %v, want %v", leaf.DNSNames, tt.host, gotDNS, !tt.wantIP)
			}
			if err := Verify(leaf, ca.CertPEM, s, now); err != nil {
				t.Errorf("the certificate does not verify for %s: %v", tt.host, err)
			}
		})
	}
}
