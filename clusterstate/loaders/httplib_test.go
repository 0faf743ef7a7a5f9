package loaders

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
)

// libraryServer answers the CEL http library tests over TLS on loopback.
func libraryServer(t *testing.T) (srv *httptest.Server, caBundle string) {
	t.Helper()
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "body": string(body), "team": r.Header.Get("X-Team")})
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"reason": "no such image"}`)
		case "/text":
			_, _ = io.WriteString(w, "not json")
		case "/list":
			_, _ = io.WriteString(w, `["a", "b"]`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
}

// TestHTTPLibraryCalls: calls of the CEL http library answer {body,
// statusCode} (non-2xx no error, a body that is not JSON null), trust the
// bundle of
// http.Client(caPEM), and never reach what the blocklist names, even by a
// name that resolves there.
func TestHTTPLibraryCalls(t *testing.T) {
	srv, caBundle := libraryServer(t)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	open := &APICalls{HTTPLimits: HTTPLimits{Blocklist: []string{}}}
	lib := func(url string) loader.APICall { return loader.APICall{URL: url, CABundle: caBundle, Library: true} }

	tests := []struct {
		name  string
		calls *APICalls
		call  loader.APICall
		check func(t *testing.T, out map[string]any)
		err   string
	}{
		{
			name: "a JSON object with its status", calls: open,
			call: loader.APICall{URL: srv.URL + "/echo", CABundle: caBundle, Library: true, Method: "POST", Data: map[string]any{"a": "b"},
				Headers: []loader.APICallHeader{{Key: "X-Team", Value: "shop"}}},
			check: func(t *testing.T, out map[string]any) {
				body, _ := out["body"].(map[string]any)
				if out["statusCode"] != 200 || body["method"] != "POST" || body["body"] != `{"a":"b"}` || body["team"] != "shop" {
					t.Errorf("answer %v", out)
				}
			},
		},
		{
			name: "a non-2xx status is an answer, not an error", calls: open, call: lib(srv.URL + "/missing"),
			check: func(t *testing.T, out map[string]any) {
				if out["statusCode"] != 404 || out["body"].(map[string]any)["reason"] != "no such image" {
					t.Errorf("answer %v", out)
				}
			},
		},
		{
			name: "a body that is not JSON is null", calls: open, call: lib(srv.URL + "/text"),
			check: func(t *testing.T, out map[string]any) {
				if v, ok := out["body"]; !ok || v != nil || out["statusCode"] != 200 {
					t.Errorf("answer %v", out)
				}
			},
		},
		{
			name: "any other JSON comes back as body", calls: open, call: lib(srv.URL + "/list"),
			check: func(t *testing.T, out map[string]any) {
				if fmt.Sprint(out["body"]) != "[a b]" || out["statusCode"] != 200 {
					t.Errorf("answer %v", out)
				}
			},
		},
		{name: "without the bundle the server is not trusted", calls: open, call: loader.APICall{URL: srv.URL + "/echo", Library: true}, err: "certificate"},
		{name: "a bundle without a certificate", calls: open, call: loader.APICall{URL: srv.URL + "/echo", CABundle: "junk", Library: true}, err: "failed to parse PEM CA bundle for APICall"},
		{name: "loopback is blocked by default", calls: &APICalls{}, call: lib(srv.URL + "/echo"), err: "address 127.0.0.1 is blocked"},
		{name: "loopback as an IPv4-mapped IPv6 address", calls: &APICalls{}, call: lib("https://[::ffff:127.0.0.1]:" + port + "/echo"), err: "address 127.0.0.1 is blocked"},
		{name: "the unspecified address", calls: &APICalls{}, call: lib("https://0.0.0.0:" + port + "/echo"), err: "address 0.0.0.0 is blocked"},
		{name: "the unspecified IPv6 address", calls: &APICalls{}, call: lib("https://[::]:" + port + "/echo"), err: "address :: is blocked"},
		{name: "AWS's IPv6 metadata address", calls: &APICalls{}, call: lib("http://[fd00:ec2::254]/latest/meta-data/"), err: "address fd00:ec2::254 is blocked"},
		{name: "Alibaba's metadata address", calls: &APICalls{}, call: lib("http://100.100.100.200/latest/meta-data/"), err: "address 100.100.100.200 is blocked"},
		{name: "the rest of link-local", calls: &APICalls{}, call: lib("http://169.254.1.1/"), err: "address 169.254.1.1 is blocked"},
		{
			name: "loopback explicitly allowed", calls: &APICalls{HTTPLimits: HTTPLimits{AllowedAddresses: []string{"127.0.0.1:" + port}}}, call: lib(srv.URL + "/echo"),
			check: func(t *testing.T, out map[string]any) {
				if out["statusCode"] != 200 {
					t.Errorf("answer %v", out)
				}
			},
		},
		{name: "an allowlist is not a string prefix", calls: &APICalls{HTTPLimits: HTTPLimits{Blocklist: []string{}, Allowlist: []string{srv.URL + "/echo"}}},
			call: lib(srv.URL + "/echoes"), err: "not in the allowed URL prefixes"},
		{name: "a name that resolves to loopback is blocked when dialled", calls: &APICalls{}, call: lib("https://localhost:" + port + "/echo"), err: "is blocked"},
		{name: "the metadata endpoint is blocked by name", calls: &APICalls{}, call: lib("http://metadata.google.internal/computeMetadata/v1/"), err: "host metadata.google.internal is blocked"},
		{name: "the metadata address is blocked", calls: &APICalls{}, call: lib("http://169.254.169.254/latest/meta-data/"), err: "address 169.254.169.254 is blocked"},
		{name: "a configured range is blocked", calls: &APICalls{HTTPLimits: HTTPLimits{Blocklist: []string{"10.0.0.0/8"}}}, call: lib("http://10.1.2.3/x"), err: "address 10.1.2.3 is blocked"},
		{name: "outside the allowlist", calls: &APICalls{HTTPLimits: HTTPLimits{Blocklist: []string{}, Allowlist: []string{srv.URL + "/echo"}}}, call: lib(srv.URL + "/text"), err: "not in the allowed URL prefixes"},
		{
			name: "inside the allowlist", calls: &APICalls{HTTPLimits: HTTPLimits{Blocklist: []string{}, Allowlist: []string{srv.URL + "/echo"}}}, call: lib(srv.URL + "/echo"),
			check: func(t *testing.T, out map[string]any) {
				if out["statusCode"] != 200 {
					t.Errorf("answer %v", out)
				}
			},
		},
		{name: "not http", calls: open, call: lib("file:///etc/passwd"), err: "want an http or https URL"},
		{name: "a namespaced policy's call, not allowed", calls: open, call: loader.APICall{URL: srv.URL + "/echo", CABundle: caBundle, Library: true, Namespace: "shop"},
			err: "http.* is not allowed in namespaced policies; set --allow-http-in-namespaced-policies to enable"},
		{
			name:  "a namespaced policy's call, allowed",
			calls: &APICalls{HTTPLimits: HTTPLimits{Blocklist: []string{}, AllowNamespacedPolicies: true}},
			call:  loader.APICall{URL: srv.URL + "/echo", CABundle: caBundle, Library: true, Namespace: "shop"},
			check: func(t *testing.T, out map[string]any) {
				if out["statusCode"] != 200 {
					t.Errorf("answer %v", out)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCall(t, tc.calls, tc.call, tc.check, tc.err)
		})
	}
}

// TestHTTPClientInAPolicy: a ValidatingPolicy calling
// http.Client(caPEM).Get reaches a TLS server only that CA vouches for,
// through the loader the cluster hands the engine; http.Get, trusting the
// system roots, does not.
func TestHTTPClientInAPolicy(t *testing.T) {
	srv, caBundle := libraryServer(t)
	const policy = `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata:
  name: ask-a-service
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  variables:
  - name: answer
    expression: %s
  validations:
  - expression: variables.answer.statusCode == 200 && variables.answer.team == object.data.team
    message: the service does not know the team
`
	cm := func(team string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "shop"}, "data": map[string]any{"team": team}}
	}
	calls := &APICalls{HTTPLimits: HTTPLimits{Blocklist: []string{}}}
	eval := func(t *testing.T, expr, team string) engine.RuleResponse {
		t.Helper()
		var vp policiesv1.ValidatingPolicy
		if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf(policy, strconv.Quote(expr))), &vp); err != nil {
			t.Fatal(err)
		}
		set, err := engine.Compile([]kyvernov1.PolicyInterface{&vp})
		if err != nil {
			t.Fatal(err)
		}
		resp := set.Validate(context.Background(), &engine.Request{Object: cm(team)}, engine.WithLoaders(loader.Loaders{APICalls: calls}))
		if len(resp.Policies) != 1 || len(resp.Policies[0].Rules) != 1 {
			t.Fatalf("response %+v, want one result", resp)
		}
		return resp.Policies[0].Rules[0]
	}
	withCA := `http.Client(` + strconv.Quote(caBundle) + `).Get("` + srv.URL + `/echo", {"X-Team": "shop"})`
	if r := eval(t, withCA, "shop"); r.Status != engine.StatusPass {
		t.Errorf("http.Client(caPEM).Get: %s %q, want pass", r.Status, r.Message)
	}
	// The CLI mocks' shape reads the same: the whole body under body.
	// (A 404 is an answer too.)
	missing := `http.Client(` + strconv.Quote(caBundle) + `).Get("` + srv.URL + `/missing")`
	if r := eval(t, `{"statusCode": dyn(200), "team": `+missing+`.body.reason}`, "no such image"); r.Status != engine.StatusPass {
		t.Errorf(".body.reason: %s %q, want pass", r.Status, r.Message)
	}
	if r := eval(t, withCA, "other"); r.Status != engine.StatusFail {
		t.Errorf("http.Client(caPEM).Get, other team: %s %q, want fail", r.Status, r.Message)
	}
	if r := eval(t, `http.client("junk").get("`+srv.URL+`/echo")`, "shop"); r.Status != engine.StatusError || !strings.Contains(r.Message, "failed to parse PEM CA bundle for APICall") {
		t.Errorf("http.client(junk): %s %q, want an error naming the bundle", r.Status, r.Message)
	}
	if r := eval(t, `http.Get("`+srv.URL+`/echo")`, "shop"); r.Status != engine.StatusError || !strings.Contains(r.Message, "certificate") {
		t.Errorf("http.Get without the CA: %s %q, want a certificate error", r.Status, r.Message)
	}
}

func TestHTTPLimitsValidate(t *testing.T) {
	if err := (HTTPLimits{}).Validate(); err != nil {
		t.Errorf("default blocklist: %v", err)
	}
	if err := (HTTPLimits{Blocklist: []string{"10.0.0.0/33"}}).Validate(); err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33"`) {
		t.Errorf("bad range: %v, want an error naming it", err)
	}
	// A call under a bad blocklist fails rather than going anywhere.
	checkCall(t, &APICalls{HTTPLimits: HTTPLimits{Blocklist: []string{"10.0.0.0/33"}}}, loader.APICall{URL: "https://example.com", Library: true}, nil, `"10.0.0.0/33"`)
}
