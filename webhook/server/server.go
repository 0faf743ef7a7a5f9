// Package server is charter's HTTPS admission server: AdmissionReview v1
// in, decision out, on Kyverno's paths (/validate/fail, /validate/ignore,
// /mutate/fail, /mutate/ignore, /policyvalidate, ...).
//
// Every request is evaluated against one immutable policy snapshot taken
// at its start, so a policy change never blocks or tears a request. The
// body is decoded once, straight into the unstructured maps the engine
// reads; buffers are pooled. A malformed review gets a 4xx with the reason,
// never a panic.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Server timeouts, as Kyverno sets them (admission-reports.md §0).
const (
	readTimeout            = 30 * time.Second
	writeTimeout           = 30 * time.Second
	idleTimeout            = 5 * time.Minute
	DefaultShutdownTimeout = 30 * time.Second
)

// Server serves a handler over TLS 1.2+ with a certificate looked up on
// every handshake, so a renewed certificate is used without a restart.
type Server struct {
	// Addr is host:port to listen on.
	Addr string
	// Handler is usually NewHandler(...).
	Handler http.Handler
	// GetCertificate returns the serving certificate (see KeyPairFiles and
	// the certs package).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// ShutdownTimeout bounds how long in-flight requests may drain after
	// the context ends (default 30 s).
	ShutdownTimeout time.Duration
	// DrainDelay is how long the server goes on serving once the context
	// ends, before it stops accepting connections: the time a cluster takes
	// to stop routing new requests to a terminating Pod (EndpointSlices,
	// kube-proxy). Every response in that time closes its connection, so
	// the API server drops the keep-alive connections it pooled to this
	// replica rather than reuse one the server is about to close, which
	// fails that admission ("write: broken pipe"; make e2e-kind, label ha,
	// saw it when an admission Pod was deleted). Zero stops at once (out of
	// cluster, where nothing routes).
	DrainDelay time.Duration
	// Log receives server errors.
	Log logr.Logger
}

// TLSConfig is the server's TLS configuration: TLS 1.2 at least, ECDHE
// with AEAD ciphers only for TLS 1.2 (TLS 1.3 suites are not
// configurable and all qualify), HTTP/1.1 only (see servedProtocols).
func TLSConfig(getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: getCertificate,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		NextProtos: []string{"http/1.1"},
	}
}

// servedProtocols is HTTP/1.1 alone, for three reasons:
//   - kube-apiserver calls a webhook Service over HTTP/1.1 whatever the
//     server offers (k8s.io/apiserver webhook client, issue 75791: HTTP/2
//     would pin every call to one replica), and a URL webhook too unless
//     the URL is a loopback one; serving HTTP/1.1 only makes an out-of-cluster
//     charter (charter serve --webhook-url=https://127.0.0.1:...) and
//     make bench-admission measure the protocol a cluster uses.
//   - Over HTTP/1.1 keep-alive each connection is read, handled and
//     answered by one goroutine; over HTTP/2 every stream of the API
//     server's single connection passes through that connection's frame
//     reader, serve loop and writer, which on 2 cores queued requests
//     behind each other (bench-admission direct, null webhook p99 5 ms over
//     HTTP/1.1 against 21 ms over HTTP/2 in the same minute).
//   - No HTTP/2 means none of its denial-of-service surface (rapid reset,
//     CVE-2023-44487; CONTINUATION floods), which is why controller-runtime
//     scaffolds webhooks with HTTP/2 off too.
func servedProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	return &p
}

// Run listens on Addr and serves until ctx ends (and DrainDelay more),
// then stops accepting connections and waits up to ShutdownTimeout for in-flight requests to
// finish. It returns nil after a clean drain.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("admission server: listen on %s: %w", s.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on a listener the caller opened (tests use port 0).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.GetCertificate == nil {
		_ = ln.Close()
		return errors.New("admission server: no certificate source")
	}
	var draining atomic.Bool
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			w.Header().Set("Connection", "close")
		}
		s.Handler.ServeHTTP(w, r)
	})
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         TLSConfig(s.GetCertificate),
		ReadTimeout:       readTimeout,
		ReadHeaderTimeout: readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		Protocols:         servedProtocols(),
		ErrorLog:          nil,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return fmt.Errorf("admission server: %w", err)
	case <-ctx.Done():
	}
	if s.DrainDelay > 0 {
		draining.Store(true)
		s.Log.Info("admission server draining: serving, closing each connection after its response", "delay", s.DrainDelay)
		select {
		case err := <-errc:
			return fmt.Errorf("admission server: %w", err)
		case <-time.After(s.DrainDelay):
		}
	}
	timeout := s.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s.Log.Info("admission server draining in-flight requests", "timeout", timeout)
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("admission server: requests still in flight after %s: %w", timeout, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admission server: %w", err)
	}
	return nil
}
