package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

type fakeKeyPair struct{ err error }

func (f fakeKeyPair) Ready(context.Context) error { return f.err }

func TestAdmissionReadiness(t *testing.T) {
	for _, tc := range []struct {
		name    string
		synced  bool
		keyPair error
		want    string // part of the error; "" means ready
	}{
		{"policies loaded, certificate served", true, nil, ""},
		{"policies not loaded yet", false, nil, "policy cache not synced"},
		{"no serving certificate yet", true, errors.New(`TLS Secret charter/charter-svc.charter.svc.kyverno-tls-pair: not found`), "serving certificate: TLS Secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := admissionReadiness(func() bool { return tc.synced }, fakeKeyPair{tc.keyPair})(httptest.NewRequest("GET", "/readyz", nil))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("not ready: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
