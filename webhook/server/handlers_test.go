package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
)

// configMaps answers the tests' ConfigMap context entries, or fails.
type configMaps struct{ err error }

func (c configMaps) ConfigMap(_ context.Context, namespace, name string) (map[string]any, error) {
	if c.err != nil {
		return nil, c.err
	}
	return map[string]any{"metadata": map[string]any{"name": name, "namespace": namespace}, "data": map[string]any{"allow": "yes"}}, nil
}

func TestValidateDecisions(t *testing.T) {
	snapshot := testSnapshot(t)
	withLabels := func(p pod, kv ...string) pod {
		labels := map[string]string{}
		for k, v := range p.labels {
			labels[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(labels, kv[i])
			} else {
				labels[kv[i]] = kv[i+1]
			}
		}
		p.labels = labels
		return p
	}
	latest := compliant()
	latest.image = "nginx"
	bad := withLabels(latest, "app.kubernetes.io/name", "")

	tests := []struct {
		name         string
		path         string
		pod          pod
		configErr    error
		wantAllowed  bool
		wantMessage  string
		wantWarnings []string
		wantAudit    bool
	}{
		{
			name: "compliant Pod is admitted", path: PathValidateFail, pod: compliant(),
			wantAllowed: true, wantAudit: true,
		},
		{
			name: "Enforce failures deny with every failing rule in Kyverno's format", path: PathValidateFail, pod: bad,
			wantMessage: "\n\nresource Pod/default/nginx was blocked due to the following policies \n\n" +
				"disallow-latest-tag:\n" +
				"  require-image-tag: 'validation error: An image tag is required. rule require-image-tag failed at path /spec/containers/0/image/'\n" +
				"require-labels:\n" +
				"  check-for-labels: 'validation error: label ''app.kubernetes.io/name'' is required. rule check-for-labels failed at path /metadata/labels/app.kubernetes.io/name/'\n",
		},
		{
			name: "Audit failure is admitted without warnings and reported", path: PathValidateFail,
			pod: withLabels(compliant(), "team", ""), wantAllowed: true, wantAudit: true,
		},
		{
			name: "Audit failure with emitWarning is admitted with a warning", path: PathValidateFail,
			pod: withLabels(compliant(), "owner", ""), wantAllowed: true, wantAudit: true,
			wantWarnings: []string{"policy warn-owner-label.check-owner: validation error: label 'owner' is recommended. rule check-owner failed at path /metadata/labels/owner/"},
		},
		{
			name: "a denial carries no warnings", path: PathValidateFail,
			pod: withLabels(bad, "owner", ""),
			wantMessage: "\n\nresource Pod/default/nginx was blocked due to the following policies \n\n" +
				"disallow-latest-tag:\n" +
				"  require-image-tag: 'validation error: An image tag is required. rule require-image-tag failed at path /spec/containers/0/image/'\n" +
				"require-labels:\n" +
				"  check-for-labels: 'validation error: label ''app.kubernetes.io/name'' is required. rule check-for-labels failed at path /metadata/labels/app.kubernetes.io/name/'\n",
		},
		{
			name: "dry run is decided the same but not reported", path: PathValidateFail,
			pod:         func() pod { p := withLabels(compliant(), "team", ""); p.dryRun = true; return p }(),
			wantAllowed: true,
		},
		{
			name: "an Enforce error under failurePolicy Fail denies", path: PathValidateFail,
			pod: withLabels(compliant(), "needs-config", "closed"), configErr: errors.New("boom"),
			wantMessage: "\n\nresource Pod/default/nginx was blocked due to the following policies \n\n" +
				"config-closed:\n  from-config: 'failed to load context: context entry \"settings\": failed to get ConfigMap default/settings: boom'\n",
		},
		{
			name: "an Enforce error under failurePolicy Ignore admits with a warning", path: PathValidateIgnore,
			pod: withLabels(compliant(), "needs-config", "open"), configErr: errors.New("boom"),
			wantAllowed: true, wantAudit: true,
			wantWarnings: []string{`policy config-open.from-config: failed to load context: context entry "settings": failed to get ConfigMap default/settings: boom`},
		},
		{
			name: "the ignore path does not see failurePolicy Fail policies", path: PathValidateIgnore, pod: bad,
			wantAllowed: true,
		},
		{
			name: "the bare path sees both", path: PathValidate, pod: withLabels(compliant(), "needs-config", "closed"),
			configErr: errors.New("boom"),
			wantMessage: "\n\nresource Pod/default/nginx was blocked due to the following policies \n\n" +
				"config-closed:\n  from-config: 'failed to load context: context entry \"settings\": failed to get ConfigMap default/settings: boom'\n",
		},
		{
			name: "filtered namespaces are admitted untouched", path: PathValidateFail,
			pod:         func() pod { p := bad; p.namespace = "kube-system"; return p }(),
			wantAllowed: true,
		},
		{
			// Kyverno gives pattern rules no result on DELETE (4da6ec4), so
			// deleting a Pod neither blocks nor queues an audit record.
			name: "DELETE gives pattern rules no result", path: PathValidateFail,
			pod:         func() pod { p := compliant(); p.operation = "DELETE"; return p }(),
			wantAllowed: true, wantAudit: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queue := NewAuditQueue(4, nil)
			h := NewHandler(Options{
				Policies: staticSnapshots{snapshot},
				Loaders:  loader.Loaders{ConfigMaps: configMaps{err: tt.configErr}},
				Filters:  DefaultResourceFilters("charter"),
				Audit:    queue,
			})
			resp := decision(t, h, tt.path, tt.pod.review())
			if resp.UID != "uid-nginx" {
				t.Errorf("UID = %q, want the request's", resp.UID)
			}
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("Allowed = %v, want %v (result %+v)", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			if !tt.wantAllowed {
				if resp.Result == nil || resp.Result.Status != "Failure" || resp.Result.Code != 0 || resp.Result.Reason != "" {
					t.Errorf("denial status = %+v, want status Failure with no code or reason", resp.Result)
				}
				if resp.Result != nil && resp.Result.Message != tt.wantMessage {
					t.Errorf("message:\n got %q\nwant %q", resp.Result.Message, tt.wantMessage)
				}
			}
			if !reflect.DeepEqual(resp.Warnings, tt.wantWarnings) {
				t.Errorf("warnings:\n got %q\nwant %q", resp.Warnings, tt.wantWarnings)
			}
			if got := len(queue.Records()) > 0; got != tt.wantAudit {
				t.Errorf("audit record queued = %v, want %v", got, tt.wantAudit)
			}
		})
	}
}

func TestDeniedWireFormat(t *testing.T) {
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}})
	p := compliant()
	p.image = "nginx"
	w := post(h, PathValidateFail, p.review())
	var raw struct {
		Response map[string]json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	var status map[string]any
	if err := json.Unmarshal(raw.Response["status"], &status); err != nil {
		t.Fatal(err)
	}
	if len(status) != 3 || status["status"] != "Failure" || status["metadata"] == nil || status["message"] == nil {
		t.Errorf("status = %v, want exactly metadata, status and message (Kyverno sets no code or reason)", status)
	}
	if _, ok := raw.Response["patch"]; ok {
		t.Error("validate response carries a patch")
	}
}

func TestAuditQueueDropsWhenFull(t *testing.T) {
	dropped := 0
	queue := NewAuditQueue(1, func() { dropped++ })
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}, Audit: queue})
	for range 3 {
		if resp := decision(t, h, PathValidateFail, compliant().review()); !resp.Allowed {
			t.Fatal("denied")
		}
	}
	if len(queue.Records()) != 1 || dropped != 2 {
		t.Errorf("queued %d, dropped %d; want 1 and 2", len(queue.Records()), dropped)
	}
}

// fakeMutator adds a label and records what it saw.
type fakeMutator struct {
	err     error
	denial  string
	calls   int
	sawDry  bool
	objects []map[string]any
}

func (f *fakeMutator) Mutate(_ context.Context, _ *engine.PolicySet, req *engine.Request, _ bool) (MutationResult, error) {
	f.calls++
	f.sawDry = req.DryRun
	f.objects = append(f.objects, req.Object)
	if f.err != nil {
		return MutationResult{}, f.err
	}
	if f.denial != "" {
		return MutationResult{Denial: f.denial}, nil
	}
	return MutationResult{Patch: []byte(`[{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]`),
		Object: map[string]any{"mutated": true}, Warnings: []string{"policy add-label.add: mutated"}}, nil
}

func TestMutate(t *testing.T) {
	snapshot := testSnapshot(t)
	tests := []struct {
		name        string
		path        string
		mutator     *fakeMutator
		pod         pod
		wantAllowed bool
		wantPatch   string
		wantCalls   int
		wantMessage string
	}{
		{name: "patch returned as JSONPatch", path: PathMutateFail, mutator: &fakeMutator{}, pod: compliant(),
			wantAllowed: true, wantCalls: 1, wantPatch: `[{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]`},
		{name: "bare path chains both sets and joins the patches", path: PathMutate, mutator: &fakeMutator{}, pod: compliant(),
			wantAllowed: true, wantCalls: 2,
			wantPatch: `[{"op":"add","path":"/metadata/labels/mutated","value":"yes"},{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]`},
		{name: "DELETE is not mutated", path: PathMutateFail, mutator: &fakeMutator{},
			pod: func() pod { p := compliant(); p.operation = "DELETE"; return p }(), wantAllowed: true},
		{name: "an error fails closed on the fail path", path: PathMutateFail, mutator: &fakeMutator{err: errors.New("boom")},
			pod: compliant(), wantCalls: 1, wantMessage: "mutation failed: boom"},
		{name: "an error fails open on the ignore path", path: PathMutateIgnore, mutator: &fakeMutator{err: errors.New("boom")},
			pod: compliant(), wantCalls: 1, wantAllowed: true},
		{name: "a denial from the mutator", path: PathMutateFail, mutator: &fakeMutator{denial: "mutation policy p error"},
			pod: compliant(), wantCalls: 1, wantMessage: "mutation policy p error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(Options{Policies: staticSnapshots{snapshot}, Mutator: tt.mutator})
			resp := decision(t, h, tt.path, tt.pod.review())
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("Allowed = %v, want %v (%+v)", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			if tt.mutator.calls != tt.wantCalls {
				t.Errorf("mutator calls = %d, want %d", tt.mutator.calls, tt.wantCalls)
			}
			if string(resp.Patch) != tt.wantPatch {
				t.Errorf("patch = %s, want %s", resp.Patch, tt.wantPatch)
			}
			if (resp.PatchType != nil) != (tt.wantPatch != "") || (resp.PatchType != nil && *resp.PatchType != "JSONPatch") {
				t.Errorf("patchType = %v", resp.PatchType)
			}
			if tt.wantCalls == 2 && !reflect.DeepEqual(tt.mutator.objects[1], map[string]any{"mutated": true}) {
				t.Errorf("second set saw %v, want the first set's result", tt.mutator.objects[1])
			}
			if !tt.wantAllowed && resp.Result.Message != tt.wantMessage {
				t.Errorf("message = %q, want %q", resp.Result.Message, tt.wantMessage)
			}
		})
	}
}

func TestMutateWithoutMutatorAdmitsUnchanged(t *testing.T) {
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}})
	resp := decision(t, h, PathMutateFail, compliant().review())
	if !resp.Allowed || resp.Patch != nil {
		t.Errorf("got %+v, want allowed without patch", resp)
	}
}

func TestNullModeAllowsWithoutEvaluating(t *testing.T) {
	// No policy source at all: evaluating would panic.
	h := NewHandler(Options{Null: true})
	p := compliant()
	p.image = "nginx"
	for _, path := range []string{PathValidateFail, PathValidateIgnore, PathMutateFail, PathMutateIgnore} {
		if resp := decision(t, h, path, p.review()); !resp.Allowed || resp.UID != "uid-nginx" {
			t.Errorf("%s: %+v", path, resp)
		}
	}
	if w := post(h, PathValidateFail, []byte("{")); w.Code != http.StatusBadRequest {
		t.Errorf("null mode still rejects malformed reviews; got %d", w.Code)
	}
}

func TestMalformedReviews(t *testing.T) {
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}, MaxRequestBytes: 4096})
	good := compliant().review()
	tests := []struct {
		name        string
		method      string
		contentType string
		body        string
		wantCode    int
		wantReason  string
		// resourceOnly cases are well-formed for /policyvalidate, which
		// keeps objects raw.
		resourceOnly bool
	}{
		{name: "empty body", body: "", wantCode: 400, wantReason: "empty request body"},
		{name: "not JSON", body: "hello", wantCode: 400, wantReason: "malformed AdmissionReview"},
		{name: "truncated", body: string(good[:len(good)/2]), wantCode: 400, wantReason: "malformed AdmissionReview"},
		{name: "wrong type for object", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"CREATE","object":"x"}}`,
			wantCode: 400, wantReason: "malformed AdmissionReview", resourceOnly: true},
		{name: "v1beta1", body: `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}`, wantCode: 400, wantReason: "expected apiVersion admission.k8s.io/v1"},
		{name: "no request", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, wantCode: 400, wantReason: "has no request"},
		{name: "no uid", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE","kind":{"kind":"Pod"}}}`, wantCode: 400, wantReason: "no uid"},
		{name: "unknown operation", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"PATCH"}}`, wantCode: 400, wantReason: `unknown operation "PATCH"`},
		{name: "no kind", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE"}}`, wantCode: 400, wantReason: "has no kind"},
		{name: "too large", body: `{"x":"` + strings.Repeat("a", 5000) + `"}`, wantCode: 413, wantReason: "larger than 4096 bytes"},
		{name: "wrong content type", contentType: "application/yaml", body: string(good), wantCode: 415, wantReason: "expected application/json"},
		{name: "GET", method: http.MethodGet, body: "", wantCode: 405, wantReason: "method GET not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{PathValidateFail, PathMutateFail, PathPolicyValidate} {
				if tt.resourceOnly && path == PathPolicyValidate {
					continue
				}
				method := tt.method
				if method == "" {
					method = http.MethodPost
				}
				r := newRequest(method, path, tt.body)
				if tt.contentType != "" {
					r.Header.Set("Content-Type", tt.contentType)
				}
				w := newRecorder()
				h.ServeHTTP(w, r)
				if w.Code != tt.wantCode || !strings.Contains(w.Body.String(), tt.wantReason) {
					t.Errorf("%s: HTTP %d %q, want %d containing %q", path, w.Code, w.Body.String(), tt.wantCode, tt.wantReason)
				}
			}
		})
	}
}

func TestRequestTimeoutFollowsAPIServer(t *testing.T) {
	h := &handlers{opts: Options{RequestTimeout: 10e9}}
	r := newRequest(http.MethodPost, "/validate/fail?timeout=2s", "")
	ctx, cancel := h.requestContext(r)
	defer cancel()
	deadline, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	if left := timeUntil(deadline); left > 2e9 || left < 1e9 {
		t.Errorf("deadline in %v, want about 2s", left)
	}
}

func TestHealth(t *testing.T) {
	ready := errors.New("certificate not issued yet")
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}, Ready: func() error { return ready }})
	for _, tc := range []struct {
		path string
		want int
	}{{PathLiveness, 200}, {PathReadiness, 500}} {
		w := newRecorder()
		h.ServeHTTP(w, newRequest(http.MethodGet, tc.path, ""))
		if w.Code != tc.want {
			t.Errorf("%s = %d, want %d", tc.path, w.Code, tc.want)
		}
	}
	ready = nil
	w := newRecorder()
	h.ServeHTTP(w, newRequest(http.MethodGet, PathReadiness, ""))
	if w.Code != 200 {
		t.Errorf("readiness after ready = %d", w.Code)
	}
}

// TestQueryValueMatchesParseQuery checks the timeout lookup against
// url.ParseQuery over well-formed and malformed queries.
func TestQueryValueMatchesParseQuery(t *testing.T) {
	queries := []string{
		"", "timeout=10s", "timeout=", "timeout", "a=b&timeout=5s", "timeout=5s&timeout=1s", "time%6Fut=3s",
		"timeout=1%73", "timeout=%zz&timeout=2s", "%zz=1&timeout=4s", "timeout=1s;x=y&timeout=2s", "a;b&timeout=7s",
		"&&timeout=8s&", "timeout=a+b", "Timeout=1s", "timeout=1s=2", "x=1&y=2",
		strings.Repeat("a=1&", 70) + "timeout=9s", strings.Repeat("&", 20000) + "timeout=9s",
	}
	for _, q := range queries {
		want := ""
		if v, _ := url.ParseQuery(q); v != nil {
			want = v.Get("timeout")
		}
		if got := queryValue(q, "timeout"); got != want {
			t.Errorf("queryValue(%.60q) = %q, ParseQuery gives %q", q, got, want)
		}
	}
}
