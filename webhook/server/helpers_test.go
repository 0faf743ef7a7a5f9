package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
)

// staticSnapshots always returns the same snapshot.
type staticSnapshots struct{ s *policycache.Snapshot }

func (s staticSnapshots) Snapshot() *policycache.Snapshot { return s.s }

// loadPolicies reads a multi-document YAML file of ClusterPolicies and
// Policies.
func loadPolicies(t testing.TB, file string) []kyvernov1.PolicyInterface {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []kyvernov1.PolicyInterface
	for _, doc := range strings.Split(string(data), "\n---\n") {
		raw, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var probe struct{ Kind string }
		if err := json.Unmarshal(raw, &probe); err != nil {
			t.Fatal(err)
		}
		var p kyvernov1.PolicyInterface = &kyvernov1.ClusterPolicy{}
		switch probe.Kind {
		case kyvernov1.PolicyKind:
			p = &kyvernov1.Policy{}
		case policiesv1.ValidatingPolicyKind:
			p = &policiesv1.ValidatingPolicy{}
		}
		if err := json.Unmarshal(raw, p); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, p)
	}
	return out
}

func testSnapshot(t testing.TB) *policycache.Snapshot {
	t.Helper()
	s, err := policycache.Build(loadPolicies(t, "testdata/policies.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Errors) > 0 {
		t.Fatalf("test policies do not compile: %v", s.Errors)
	}
	return s
}

// pod describes the Pod of a review.
type pod struct {
	name      string
	namespace string
	labels    map[string]string
	image     string
	dryRun    bool
	operation string
}

// compliant has every label and a tagged image.
func compliant() pod {
	return pod{name: "nginx", namespace: "default", image: "nginx:1.27", labels: map[string]string{
		"app.kubernetes.io/name": "nginx", "team": "web", "owner": "alice"}}
}

func (p pod) review() []byte {
	labels := map[string]any{}
	for k, v := range p.labels {
		labels[k] = v
	}
	op := p.operation
	if op == "" {
		op = "CREATE"
	}
	obj := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": p.name, "namespace": p.namespace, "labels": labels},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": p.image}}},
	}
	req := map[string]any{
		"uid":       "uid-" + p.name,
		"kind":      map[string]any{"group": "", "version": "v1", "kind": "Pod"},
		"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
		"name":      p.name,
		"namespace": p.namespace,
		"operation": op,
		"userInfo":  map[string]any{"username": "alice"},
		"dryRun":    p.dryRun,
	}
	if op == "DELETE" {
		req["oldObject"] = obj
	} else {
		req["object"] = obj
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	return body
}

// post sends a body to the handler and returns the recorder.
func post(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// decision posts and decodes the AdmissionResponse, failing on anything
// but a 200 with a response.
func decision(t *testing.T, h http.Handler, path string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	w := post(h, path, body)
	if w.Code != http.StatusOK {
		t.Fatalf("POST %s: HTTP %d: %s", path, w.Code, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil {
		t.Fatalf("decoding response %s: %v", w.Body.String(), err)
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || review.Response == nil {
		t.Fatalf("response envelope: %s", w.Body.String())
	}
	return review.Response
}

func newRequest(method, target, body string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func timeUntil(t time.Time) time.Duration { return time.Until(t) }
