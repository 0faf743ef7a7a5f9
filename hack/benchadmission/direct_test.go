package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/charter-dev/charter/hack/benchadmission/workload"
	"github.com/charter-dev/charter/webhook/server"
)

// tlsServer serves h over HTTPS with the benchmark's certificate and
// returns a target for it.
func tlsServer(t *testing.T, h http.Handler, null bool) *webhookTarget {
	t.Helper()
	caPEM, cert, err := servingCertificate()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &webhookTarget{name: "test", url: srv.URL + server.PathValidateFail, null: null, client: httpClient(caPEM, 2)}
}

func reviewOf(t *testing.T, pod workload.Pod) *review {
	t.Helper()
	body, err := workload.Review(pod.Pod, "uid-"+pod.Pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	return &review{body: body, uid: "uid-" + pod.Pod.Name, pod: pod}
}

func podNamed(t *testing.T, name string) workload.Pod {
	t.Helper()
	for _, p := range workload.Pods("bench") {
		if p.Pod.Name == name {
			return p
		}
	}
	t.Fatalf("no Pod %s in the workload", name)
	return workload.Pod{}
}

func kindOf(err error) errorKind {
	var re *requestError
	if errors.As(err, &re) {
		return re.kind
	}
	return ""
}

// TestSendChecksTheDecision: the null webhook allows everything, which is
// right for the null target and a wrong decision where charter must deny.
func TestSendChecksTheDecision(t *testing.T) {
	null := server.NewHandler(server.Options{Null: true})
	bad, good := reviewOf(t, podNamed(t, "privileged")), reviewOf(t, podNamed(t, "restricted"))

	asNull := tlsServer(t, null, true)
	for _, rv := range []*review{bad, good} {
		if err := asNull.send(context.Background(), rv); err != nil {
			t.Errorf("null target, Pod %s: %v", rv.pod.Pod.Name, err)
		}
	}
	asCharter := tlsServer(t, null, false)
	if err := asCharter.send(context.Background(), good); err != nil {
		t.Errorf("compliant Pod allowed: %v", err)
	}
	if err := asCharter.send(context.Background(), bad); kindOf(err) != kindWrong {
		t.Errorf("non-compliant Pod allowed where charter decides: err = %v, want a wrong decision", err)
	}
}

func TestSendClassifiesFailures(t *testing.T) {
	rv := reviewOf(t, podNamed(t, "restricted"))
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    errorKind
	}{
		{"server error", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }, kindHTTP},
		{"not a review", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"hello":1}`)) }, kindHTTP},
		{"another uid", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"other","allowed":true}}`))
		}, kindHTTP},
		{"denied", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"uid-restricted","allowed":false,"status":{"message":"no"}}}`))
		}, kindWrong},
	}
	for _, tt := range tests {
		target := tlsServer(t, tt.handler, false)
		if err := target.send(context.Background(), rv); kindOf(err) != tt.want {
			t.Errorf("%s: err = %v, want kind %q", tt.name, err, tt.want)
		}
	}

	gone := tlsServer(t, http.NotFoundHandler(), false)
	gone.url = "https://127.0.0.1:1/validate/fail"
	if err := gone.send(context.Background(), rv); kindOf(err) != kindTransport {
		t.Errorf("unreachable server: err = %v, want a transport error", err)
	}
}
