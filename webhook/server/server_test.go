package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charter-dev/charter/webhook/certs"
)

// issue returns a CA bundle and a serving pair for 127.0.0.1.
func issue(t *testing.T) (caPEM []byte, pair certs.KeyPair) {
	t.Helper()
	now := time.Now()
	ca, err := certs.NewCA("charter", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err = certs.NewServing(ca, certs.Serving{Service: "charter", Namespace: "charter", Hosts: []string{"127.0.0.1"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM, pair
}

func writePair(t *testing.T, dir string, pair certs.KeyPair) (string, string) {
	t.Helper()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pair.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pair.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// startServer serves h on a free port until the test ends, and returns its
// address and a function that stops it and returns Serve's error.
func startServer(t *testing.T, h http.Handler, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{Handler: h, GetCertificate: getCert, ShutdownTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	stop := func() error { cancel(); return <-done }
	t.Cleanup(func() { cancel() })
	return ln.Addr().String(), stop
}

func client(caPEM []byte, maxVersion uint16) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: maxVersion},
	}}
}

func TestServerTLS(t *testing.T) {
	caPEM, pair := issue(t)
	certFile, keyFile := writePair(t, t.TempDir(), pair)
	kp, err := NewKeyPairFiles(certFile, keyFile, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := startServer(t, NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}}), kp.GetCertificate)

	resp, err := client(caPEM, 0).Post("https://"+addr+PathValidateFail, "application/json", bytes.NewReader(compliant().review()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("status %d over TLS %x", resp.StatusCode, resp.TLS.Version)
	}

	if _, err := client(caPEM, tls.VersionTLS11).Get("https://" + addr + PathLiveness); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

func TestKeyPairFilesReloadsRotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	caPEM, pair := issue(t)
	certFile, keyFile := writePair(t, dir, pair)
	kp, err := NewKeyPairFiles(certFile, keyFile, 0)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, NewHandler(Options{Null: true}), kp.GetCertificate)
	serial := func(caPEM []byte) string {
		c := client(caPEM, 0)
		c.Transport.(*http.Transport).DisableKeepAlives = true
		resp, err := c.Get("https://" + addr + PathLiveness)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	first := serial(caPEM)

	caPEM2, pair2 := issue(t)
	// Same mtime granularity guard: make the new files visibly newer.
	later := time.Now().Add(2 * time.Second)
	writePair(t, dir, pair2)
	_ = os.Chtimes(certFile, later, later)
	_ = os.Chtimes(keyFile, later, later)
	if second := serial(caPEM2); second == first {
		t.Error("the rotated certificate was not served")
	}

	// A broken write keeps the last good pair.
	if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	later = later.Add(2 * time.Second)
	_ = os.Chtimes(certFile, later, later)
	serial(caPEM2)
}

func TestShutdownDrainsInFlightRequests(t *testing.T) {
	caPEM, pair := issue(t)
	tlsPair, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		finished.Store(true)
		writeResponse(w, allowed("uid-slow", nil))
	})
	addr, stop := startServer(t, slow, func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &tlsPair, nil })

	result := make(chan error, 1)
	go func() {
		resp, err := client(caPEM, 0).Post("https://"+addr+"/validate/fail", "application/json", strings.NewReader("{}"))
		if err == nil {
			var review struct{ Response struct{ Allowed bool } }
			err = json.NewDecoder(resp.Body).Decode(&review)
			resp.Body.Close()
			if err == nil && !review.Response.Allowed {
				err = errFalse
			}
		}
		result <- err
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// The server must not return while the request is in flight.
	select {
	case err := <-stopped:
		t.Fatalf("server stopped with a request in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	// New connections are refused while draining.
	if _, err := client(caPEM, 0).Get("https://" + addr + PathLiveness); err == nil {
		t.Error("a new request was served during shutdown")
	}
	close(release)
	if err := <-result; err != nil {
		t.Errorf("in-flight request: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("stop: %v", err)
	}
	if !finished.Load() {
		t.Error("handler did not finish")
	}
}

var errFalse = &httpError{reason: "request was not allowed"}

// TestServerSpeaksHTTP1Only: a client offering HTTP/2 first, as
// kube-apiserver's webhook client does for a loopback URL, is answered over
// HTTP/1.1, the protocol the API server uses for a webhook Service.
func TestServerSpeaksHTTP1Only(t *testing.T) {
	caPEM, pair := issue(t)
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, NewHandler(Options{Null: true}), func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, protos := range [][]string{{"h2", "http/1.1"}, {"h2"}} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, NextProtos: protos})
		if len(protos) == 1 {
			// Offered only HTTP/2, the handshake fails: ALPN has nothing
			// in common.
			if err == nil {
				t.Errorf("offering only %v: handshake succeeded with %q", protos, conn.ConnectionState().NegotiatedProtocol)
				conn.Close()
			}
			continue
		}
		if err != nil {
			t.Fatalf("offering %v: %v", protos, err)
		}
		if got := conn.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
			t.Errorf("offering %v: negotiated %q, want http/1.1", protos, got)
		}
		conn.Close()
	}

	c := client(caPEM, 0)
	c.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	resp, err := c.Post("https://"+addr+PathValidateFail, "application/json", bytes.NewReader(compliant().review()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusOK {
		t.Errorf("an HTTP/2-capable client got %s %d, want HTTP/1.1 200", resp.Proto, resp.StatusCode)
	}
}

// TestDrainDelayServesAndClosesConnections: for DrainDelay after the
// context ends, the server still answers, on new connections too, and each
// response closes its connection, so a client (the API server) stops
// reusing its pooled connections before the server goes.
func TestDrainDelayServesAndClosesConnections(t *testing.T) {
	caPEM, pair := issue(t)
	tlsPair, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeResponse(w, allowed("uid", nil)) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const delay = time.Second
	srv := &Server{Handler: ok, DrainDelay: delay, ShutdownTimeout: 5 * time.Second,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &tlsPair, nil }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	url := "https://" + ln.Addr().String() + "/validate/fail"
	c := client(caPEM, 0)

	post := func() *http.Response {
		t.Helper()
		resp, err := c.Post(url, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post(); resp.Close {
		t.Fatal("a response closed its connection before the context ended")
	}
	cancel()
	stopping := time.Now()
	time.Sleep(100 * time.Millisecond)
	for range 3 {
		if resp := post(); !resp.Close || resp.StatusCode != http.StatusOK {
			t.Errorf("while draining: status %d, Connection: close %v; want 200 and close", resp.StatusCode, resp.Close)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if waited := time.Since(stopping); waited < delay {
		t.Errorf("server stopped %s after the context ended, before its drain delay of %s", waited, delay)
	}
	if _, err := c.Post(url, "application/json", strings.NewReader("{}")); err == nil {
		t.Error("a request was served after the drain delay and shutdown")
	}
}
