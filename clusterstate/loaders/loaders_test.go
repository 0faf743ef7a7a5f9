package loaders

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/controlplane"
)

// apiServer starts a local control plane for the tests that read from a
// real API server, or skips when its binaries are not built.
func apiServer(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	if _, err := controlplane.DefaultBinaryDir(); err != nil {
		t.Skipf("no control plane binaries (make controlplane): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	return cp
}

func TestAgainstAPIServer(t *testing.T) {
	cp := apiServer(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := context.Background()
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "registries", Namespace: "default", Labels: map[string]string{"role": "allow"}},
			Data: map[string]string{"allowed": "ghcr.io,registry.k8s.io"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}},
	} {
		if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("configMap", func(t *testing.T) {
		got, err := ConfigMaps{Client: cs}.ConfigMap(ctx, "default", "registries")
		if err != nil {
			t.Fatal(err)
		}
		if got["apiVersion"] != "v1" || got["kind"] != "ConfigMap" {
			t.Errorf("apiVersion %v, kind %v; want v1 ConfigMap", got["apiVersion"], got["kind"])
		}
		if data, _ := got["data"].(map[string]any); data["allowed"] != "ghcr.io,registry.k8s.io" {
			t.Errorf("data = %v", got["data"])
		}
		if _, err := (ConfigMaps{Client: cs}).ConfigMap(ctx, "default", "missing"); !apierrors.IsNotFound(err) {
			t.Errorf("missing ConfigMap: %v, want NotFound", err)
		}
	})

	// Objects as loader.ResourceLoader: resource.* and a MutatingPolicy's
	// mutate-existing targets.
	t.Run("resources", func(t *testing.T) {
		objs := Objects{Client: dynamic.NewForConfigOrDie(cp.RESTConfig()),
			Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))}
		got, err := objs.Resource(ctx, "v1", "configmaps", "default", "registries")
		if err != nil || got == nil || got["data"].(map[string]any)["allowed"] != "ghcr.io,registry.k8s.io" {
			t.Errorf("Resource: %v, %v", got, err)
		}
		if got, err := objs.Resource(ctx, "v1", "configmaps", "default", "missing"); got != nil || err != nil {
			t.Errorf("missing object: %v, %v; want nil, nil", got, err)
		}
		names := func(list []map[string]any) []string {
			var out []string
			for _, o := range list {
				out = append(out, o["metadata"].(map[string]any)["name"].(string))
			}
			return out
		}
		list, err := objs.Resources(ctx, "v1", "configmaps", "default")
		if n := strings.Join(names(list), ","); err != nil || !strings.Contains(n, "registries") || !strings.Contains(n, "other") {
			t.Errorf("Resources of default: %v, %v", n, err)
		}
		// A cluster-scoped resource is listed whole without a namespace,
		// and refused with one: a namespaced policy always names its own
		// namespace, and must not read ClusterRoleBindings or Nodes.
		list, err = objs.Resources(ctx, "v1", "namespaces", "")
		if n := strings.Join(names(list), ","); err != nil || !strings.Contains(n, "kube-system") {
			t.Errorf("Resources of namespaces: %v, %v", n, err)
		}
		var scoped *ClusterScopedLookupError
		for _, lookup := range []func() (any, error){
			func() (any, error) {
				return objs.Resources(ctx, "rbac.authorization.k8s.io/v1", "clusterrolebindings", "default")
			},
			func() (any, error) { return objs.Resources(ctx, "v1", "namespaces", "default") },
			func() (any, error) { return objs.Resource(ctx, "v1", "namespaces", "default", "kube-system") },
			func() (any, error) {
				return objs.Resource(ctx, "rbac.authorization.k8s.io/v1", "clusterroles", "default", "cluster-admin")
			},
		} {
			got, err := lookup()
			if !errors.As(err, &scoped) || !strings.Contains(err.Error(), "cluster-scoped") {
				t.Errorf("a namespaced lookup of a cluster-scoped resource: %v, %v; want a ClusterScopedLookupError", got, err)
			}
		}
		if _, err := objs.Resources(ctx, "v1", "nosuchresources", ""); err == nil {
			t.Error("an unknown resource listed without error")
		}
	})

	calls := NewAPICalls(cs)
	tests := []struct {
		name  string
		call  loader.APICall
		check func(t *testing.T, out map[string]any)
		err   string
	}{
		{
			name: "GET a list with a query",
			call: loader.APICall{URLPath: "/api/v1/namespaces/default/configmaps?labelSelector=role%3Dallow"},
			check: func(t *testing.T, out map[string]any) {
				items, _ := out["items"].([]any)
				if len(items) != 1 || items[0].(map[string]any)["metadata"].(map[string]any)["name"] != "registries" {
					t.Errorf("items = %v, want the one labelled ConfigMap", items)
				}
			},
		},
		{
			name: "GET one object, method in lower case",
			call: loader.APICall{Method: "get", URLPath: "/api/v1/namespaces/default/configmaps/other"},
			check: func(t *testing.T, out map[string]any) {
				if out["kind"] != "ConfigMap" {
					t.Errorf("kind = %v", out["kind"])
				}
			},
		},
		{
			name: "POST the data as the body",
			call: loader.APICall{Method: "POST", URLPath: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Data: map[string]any{
				"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
				"spec": map[string]any{"resourceAttributes": map[string]any{"verb": "get", "resource": "configmaps", "namespace": "default"}},
			}},
			check: func(t *testing.T, out map[string]any) {
				if st, _ := out["status"].(map[string]any); st["allowed"] != true {
					t.Errorf("status = %v, want allowed", out["status"])
				}
			},
		},
		{name: "a path that is not there", call: loader.APICall{URLPath: "/api/v1/namespaces/default/configmaps/missing"}, err: "could not find the requested resource"},
		{name: "a relative path", call: loader.APICall{URLPath: "api/v1/namespaces"}, err: "want an absolute path"},
		{name: "an unknown method", call: loader.APICall{Method: "DELETE", URLPath: "/api/v1/namespaces"}, err: `method "DELETE": want GET or POST`},
		{name: "nothing to call", call: loader.APICall{}, err: "neither urlPath nor service.url is set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCall(t, calls, tc.call, tc.check, tc.err)
		})
	}
}

func checkCall(t *testing.T, calls *APICalls, call loader.APICall, check func(*testing.T, map[string]any), wantErr string) {
	t.Helper()
	out, err := calls.Call(context.Background(), call)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	m, ok := out.(map[string]any)
	if !ok {
		t.Fatalf("answer %T, want an object", out)
	}
	check(t, m)
}

func TestServiceCalls(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "contentType": r.Header.Get("Content-Type"), "body": string(body),
				"authorization": r.Header.Get("Authorization"), "accept": r.Header.Values("Accept")})
		case "/broken":
			http.Error(w, "registry unavailable\nmore detail", http.StatusServiceUnavailable)
		case "/text":
			_, _ = io.WriteString(w, "not json")
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/huge":
			_, _ = w.Write([]byte(`"`))
			_, _ = w.Write([]byte(strings.Repeat("x", MaxResponseBytes)))
			_, _ = w.Write([]byte(`"`))
		}
	}))
	defer srv.Close()
	caBundle := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	// The server is on loopback, which the guard lets through only when
	// told to.
	allowed := []string{strings.TrimPrefix(srv.URL, "https://")}
	calls := &APICalls{HTTPLimits: HTTPLimits{AllowedAddresses: allowed}}
	namespaced := &APICalls{HTTPLimits: HTTPLimits{AllowedAddresses: allowed, AllowNamespacedPolicies: true}}

	tests := []struct {
		name  string
		calls *APICalls
		call  loader.APICall
		check func(t *testing.T, out map[string]any)
		err   string
	}{
		{
			name: "GET trusting the caBundle",
			call: loader.APICall{URL: srv.URL + "/echo", CABundle: caBundle},
			check: func(t *testing.T, out map[string]any) {
				if out["method"] != "GET" || out["body"] != "" {
					t.Errorf("answer %v, want a GET without a body", out)
				}
			},
		},
		{
			name: "POST sends the data as JSON",
			call: loader.APICall{Method: "POST", URL: srv.URL + "/echo", CABundle: caBundle, Data: map[string]any{"image": "nginx"}},
			check: func(t *testing.T, out map[string]any) {
				if out["method"] != "POST" || out["contentType"] != "application/json" || out["body"] != `{"image":"nginx"}` {
					t.Errorf("answer %v", out)
				}
			},
		},
		{
			name: "service headers are sent, replacing a default they name",
			call: loader.APICall{URL: srv.URL + "/echo", CABundle: caBundle, Headers: []loader.APICallHeader{
				{Key: "Authorization", Value: "Bearer t0ken"}, {Key: "accept", Value: "application/json"}, {Key: "Accept", Value: "text/json"},
			}},
			check: func(t *testing.T, out map[string]any) {
				if out["authorization"] != "Bearer t0ken" || fmt.Sprint(out["accept"]) != "[application/json text/json]" {
					t.Errorf("answer %v", out)
				}
			},
		},
		{name: "an error status names it and the first line", call: loader.APICall{URL: srv.URL + "/broken", CABundle: caBundle}, err: "HTTP 503: registry unavailable"},
		{name: "an answer that is not JSON", call: loader.APICall{URL: srv.URL + "/text", CABundle: caBundle}, err: "the answer is not JSON"},
		{name: "an answer over the limit", call: loader.APICall{URL: srv.URL + "/huge", CABundle: caBundle}, err: "larger than"},
		{name: "a server the bundle does not vouch for", call: loader.APICall{URL: srv.URL + "/echo"}, err: "certificate"},
		{name: "a bundle without a certificate", call: loader.APICall{URL: srv.URL + "/echo", CABundle: "junk"}, err: "service.caBundle holds no PEM certificate"},
		{name: "loopback is blocked unless allowed", calls: &APICalls{}, call: loader.APICall{URL: srv.URL + "/echo", CABundle: caBundle},
			err: "address 127.0.0.1 is blocked (--cel-http-blocklist 127.0.0.0/8: loopback; --egress-allow lets an address through)"},
		{name: "the metadata endpoint is blocked", call: loader.APICall{URL: "http://169.254.169.254/latest/meta-data/iam/"},
			err: "address 169.254.169.254 is blocked (--cel-http-blocklist 169.254.0.0/16: link-local, cloud metadata"},
		{name: "a redirect to the metadata endpoint is blocked", call: loader.APICall{URL: srv.URL + "/to-metadata", CABundle: caBundle},
			err: "address 169.254.169.254 is blocked"},
		{name: "a namespaced policy's service call, not allowed", call: loader.APICall{URL: srv.URL + "/echo", CABundle: caBundle, Namespace: "shop"},
			err: "a namespaced policy may not call out (charter serve --allow-http-in-namespaced-policies)"},
		{
			name: "a namespaced policy's service call, allowed", calls: namespaced, call: loader.APICall{URL: srv.URL + "/echo", CABundle: caBundle, Namespace: "shop"},
			check: func(t *testing.T, out map[string]any) {
				if out["method"] != "GET" {
					t.Errorf("answer %v", out)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.calls
			if c == nil {
				c = calls
			}
			checkCall(t, c, tc.call, tc.check, tc.err)
		})
	}
}
