// Package loaders gives the engine what its context entries look up in a
// cluster: ConfigMaps for `configMap` entries and the API server or a
// Service for `apiCall` entries. The engine is pure and is handed these
// through engine.Loaders; the admission webhook and the reports
// controller hand it the same ones, so a policy reads the same data
// whichever of them evaluates it.
//
// Both read through the API server on every evaluation, as Kyverno does:
// a ConfigMap or an API answer changed a moment ago is what the next
// request sees, with no cache to go stale and no informer holding every
// ConfigMap of the cluster in memory.
package loaders

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/engine"
)

// ConfigMaps serves `configMap` context entries with a GET of the
// ConfigMap.
type ConfigMaps struct {
	Client kubernetes.Interface
}

var _ engine.ConfigMapLoader = ConfigMaps{}

// ConfigMap returns the ConfigMap as unstructured content, with its
// apiVersion and kind, as a policy's JMESPath sees it.
func (c ConfigMaps) ConfigMap(ctx context.Context, namespace, name string) (map[string]any, error) {
	cm, err := c.Client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		return nil, fmt.Errorf("configmaps %q in namespace %q: %w", name, namespace, err)
	}
	out["apiVersion"], out["kind"] = "v1", "ConfigMap"
	return out, nil
}

// Limits of a Service call: how long it may take and how much of its
// answer is read. A policy's context entry runs inside an admission
// request, whose own deadline (the webhook's timeout) bounds it too.
const (
	DefaultServiceTimeout = 10 * time.Second
	MaxResponseBytes      = 10 << 20
)

// APICalls serves `apiCall` context entries: a urlPath is a request to
// the API server with charter's own identity (so charter's RBAC decides
// what policies may read), a service URL an HTTPS request to that URL,
// trusting the entry's caBundle.
type APICalls struct {
	// REST reaches the API server; any client of it will do, the path of
	// the entry replaces the client's own.
	REST rest.Interface
	// ServiceTimeout bounds a Service call (DefaultServiceTimeout when 0).
	ServiceTimeout time.Duration
	// HTTPLimits bound what the CEL http library may call (apiCall
	// entries of ClusterPolicies are not bound by them).
	HTTPLimits HTTPLimits

	// clients holds one HTTP client per caBundle (and per whether it is
	// the CEL library's), so calls to a Service reuse their connections.
	clients sync.Map // clientKey → *http.Client

	guardOnce sync.Once
	httpGuard *httpGuard
	guardErr  error
}

type clientKey struct {
	caBundle string
	library  bool
}

var _ engine.APICaller = (*APICalls)(nil)

// NewAPICalls returns an APICalls that reaches the API server through
// kube, with its identity and rate limits.
func NewAPICalls(kube kubernetes.Interface) *APICalls {
	return &APICalls{REST: kube.CoreV1().RESTClient()}
}

// Call performs the call and returns its decoded JSON answer.
func (a *APICalls) Call(ctx context.Context, call engine.APICall) (any, error) {
	return a.call(ctx, call, false)
}

// call performs the call; guardServices binds a service URL by the HTTP
// limits (see Guarded).
func (a *APICalls) call(ctx context.Context, call engine.APICall, guardServices bool) (any, error) {
	method := strings.ToUpper(call.Method)
	if method == "" {
		method = http.MethodGet
	}
	if method != http.MethodGet && method != http.MethodPost {
		return nil, fmt.Errorf("method %q: want GET or POST", call.Method)
	}
	var body []byte
	if method == http.MethodPost {
		var err error
		if body, err = json.Marshal(call.Data); err != nil {
			return nil, fmt.Errorf("encoding the data: %w", err)
		}
	}
	if call.Library {
		if call.URL == "" {
			return nil, errors.New("the CEL http library needs a URL")
		}
		return a.libraryCall(ctx, method, call, body)
	}
	var (
		raw []byte
		err error
	)
	switch {
	case call.URLPath != "":
		raw, err = a.callAPIServer(ctx, method, call.URLPath, body)
	case call.URL != "":
		raw, err = a.callService(ctx, method, call, body, guardServices)
	default:
		return nil, errors.New("neither urlPath nor service.url is set")
	}
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	return out, nil
}

func (a *APICalls) callAPIServer(ctx context.Context, method, urlPath string, body []byte) ([]byte, error) {
	if a.REST == nil {
		return nil, errors.New("no API server client")
	}
	if !strings.HasPrefix(urlPath, "/") {
		return nil, fmt.Errorf("urlPath %q: want an absolute path such as /api/v1/namespaces", urlPath)
	}
	req := a.REST.Verb(method).RequestURI(urlPath).SetHeader("Accept", "application/json")
	if body != nil {
		req = req.SetHeader("Content-Type", "application/json").Body(body)
	}
	return req.Do(ctx).Raw()
}

func (a *APICalls) callService(ctx context.Context, method string, call engine.APICall, body []byte, guarded bool) ([]byte, error) {
	var guard *httpGuard
	if guarded {
		var err error
		if guard, err = a.guard(); err != nil {
			return nil, err
		}
		if err := guard.checkURL(call.URL); err != nil {
			return nil, err
		}
	}
	client, err := a.client(call.CABundle, guard)
	if err != nil {
		return nil, err
	}
	status, raw, err := a.doService(ctx, client, method, call, body)
	if err != nil {
		return nil, err
	}
	if !statusOK(status) {
		return nil, fmt.Errorf("HTTP %d: %s", status, firstLine(raw))
	}
	return raw, nil
}

// doService sends the request and reads the answer, within
// MaxResponseBytes, whatever its status.
func (a *APICalls) doService(ctx context.Context, client *http.Client, method string, call engine.APICall, body []byte) (int, []byte, error) {
	timeout := a.ServiceTimeout
	if timeout <= 0 {
		timeout = DefaultServiceTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, call.URL, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// The policy's service.headers (an Authorization token, say) come
	// last: a header they name replaces the default, and a key they
	// repeat is sent once per value.
	named := map[string]bool{}
	for _, h := range call.Headers {
		if !named[http.CanonicalHeaderKey(h.Key)] {
			req.Header.Del(h.Key)
			named[http.CanonicalHeaderKey(h.Key)] = true
		}
		req.Header.Add(h.Key, h.Value)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	// One byte past the limit tells a long answer from one that fits.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(raw) > MaxResponseBytes {
		return 0, nil, fmt.Errorf("the answer is larger than %d bytes", MaxResponseBytes)
	}
	return resp.StatusCode, raw, nil
}

// client returns the HTTP client that trusts caBundle (the system roots
// when it is empty) and, when guard is set, dials no blocked address.
func (a *APICalls) client(caBundle string, guard *httpGuard) (*http.Client, error) {
	key := clientKey{caBundle: caBundle, library: guard != nil}
	if c, ok := a.clients.Load(key); ok {
		return c.(*http.Client), nil
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if caBundle != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(caBundle)) {
			if guard != nil {
				return nil, errors.New("failed to parse PEM CA bundle for APICall")
			}
			return nil, errors.New("service.caBundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	if guard != nil {
		// No proxy: the address checked must be the one dialled.
		transport.Proxy = nil
		dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: guard.control}
		transport.DialContext = dialer.DialContext
	}
	c, _ := a.clients.LoadOrStore(key, &http.Client{Transport: transport})
	return c.(*http.Client), nil
}

// firstLine is the start of an error answer, enough to name the problem
// without copying a whole page into a policy's message.
func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
