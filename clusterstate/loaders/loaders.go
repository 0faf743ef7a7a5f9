// Package loaders gives the engine what its context entries look up in a
// cluster: ConfigMaps for `configMap` entries and the API server or a
// Service for `apiCall` entries. The engine is pure and is handed these
// through loader.Loaders; the admission webhook and the reports
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
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/egress"
)

// ConfigMaps serves `configMap` context entries with a GET of the
// ConfigMap.
type ConfigMaps struct {
	Client kubernetes.Interface
}

var _ loader.ConfigMapLoader = ConfigMaps{}

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
// answer is read (HTTPLimits.MaxResponseBytes sets another). A policy's
// context entry runs inside an admission request, whose own deadline (the
// webhook's timeout) bounds it too.
const (
	DefaultServiceTimeout = egress.DefaultTimeout
	MaxResponseBytes      = egress.DefaultMaxResponseBytes
)

// APICalls serves `apiCall` context entries, GlobalContextEntry apiCalls
// and the CEL http library: a urlPath is a request to the API server with
// charter's own identity (so charter's RBAC decides what policies may
// read), a service URL an HTTP(S) request to that URL, trusting the
// entry's caBundle, through the egress guard (HTTPLimits): no loopback,
// cloud metadata or node address, checked on the address dialled and on
// every redirect, bounded in time and size.
type APICalls struct {
	// REST reaches the API server; any client of it will do, the path of
	// the entry replaces the client's own.
	REST rest.Interface
	// ServiceTimeout bounds a Service call (DefaultServiceTimeout when 0).
	ServiceTimeout time.Duration
	// HTTPLimits bound what every service URL may reach.
	HTTPLimits HTTPLimits

	// clients holds one HTTP client per caBundle, so calls to a Service
	// reuse their connections.
	clients sync.Map // caBundle → *http.Client

	guardOnce sync.Once
	egress    *egress.Guard
	guardErr  error
}

var _ loader.APICaller = (*APICalls)(nil)

// NewAPICalls returns an APICalls that reaches the API server through
// kube, with its identity and rate limits.
func NewAPICalls(kube kubernetes.Interface) *APICalls {
	return &APICalls{REST: kube.CoreV1().RESTClient()}
}

// Call performs the call and returns its decoded JSON answer.
func (a *APICalls) Call(ctx context.Context, call loader.APICall) (any, error) {
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
		raw, err = a.callService(ctx, method, call, body)
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

func (a *APICalls) callService(ctx context.Context, method string, call loader.APICall, body []byte) ([]byte, error) {
	if err := a.serviceRefusal(call); err != nil {
		return nil, err
	}
	status, raw, err := a.send(ctx, method, call, body, false)
	if err != nil {
		return nil, err
	}
	if !statusOK(status) {
		return nil, fmt.Errorf("HTTP %d: %s", status, firstLine(raw))
	}
	return raw, nil
}

// doService sends the request and reads the answer, within the guard's
// bounds, whatever its status.
func (a *APICalls) doService(ctx context.Context, client *http.Client, g *egress.Guard, method string, call loader.APICall, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, g.Timeout())
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
	raw, err := g.ReadBody(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, raw, nil
}

// client returns the guarded HTTP client that trusts caBundle (the system
// roots when it is empty); library says whose words a bad bundle gets
// (the CEL library's are Kyverno's).
func (a *APICalls) client(caBundle string, g *egress.Guard, library bool) (*http.Client, error) {
	if c, ok := a.clients.Load(caBundle); ok {
		return c.(*http.Client), nil
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if caBundle != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(caBundle)) {
			if library {
				return nil, errors.New("failed to parse PEM CA bundle for APICall")
			}
			return nil, errors.New("service.caBundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	c, _ := a.clients.LoadOrStore(caBundle, g.Client(tlsConfig))
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
