package globalcontext

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	"github.com/charter-dev/charter/engine/loader"
)

// scriptedCalls answers the calls of apiCall entries from a script: each
// call takes the next answer, the last one repeating.
type scriptedCalls struct {
	mu      sync.Mutex
	answers []any // an error or the data
	calls   []loader.APICall
}

func (c *scriptedCalls) Call(_ context.Context, call loader.APICall) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
	a := c.answers[0]
	if len(c.answers) > 1 {
		c.answers = c.answers[1:]
	}
	if err, ok := a.(error); ok {
		return nil, err
	}
	return a, nil
}

func entryObject(t *testing.T, name string, generation int64, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf("apiVersion: kyverno.io/v2alpha1\nkind: GlobalContextEntry\nmetadata: {name: %s}\nspec: %s", name, spec)), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetGeneration(generation)
	return u
}

func waitLoaded(t *testing.T, s *Store, name string) Status {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, ok := s.Status(name); ok && st.Loaded {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never loaded", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAPICallEntry: an apiCall entry is retried up to its retryLimit, its
// data and projections are read by "<entry>" and "<entry>.<projection>",
// and what does not exist is told apart from what cannot load.
func TestAPICallEntry(t *testing.T) {
	calls := &scriptedCalls{answers: []any{errors.New("connection refused"), errors.New("connection refused"),
		map[string]any{"registries": []any{"ghcr.io", "quay.io"}}}}
	s := New(nil, nil, nil, calls, logr.Discard())
	s.retryBackoff = time.Millisecond
	var mu sync.Mutex
	var changed []string
	s.OnChange(func(name string) {
		mu.Lock()
		defer mu.Unlock()
		changed = append(changed, name)
	})
	s.set(entryObject(t, "registries", 1, `{apiCall: {service: {url: "https://registry.example/v2", headers: [{key: Authorization, value: "Bearer x"}]},
  method: POST, data: [{key: page, value: 2}], retryLimit: 3}, projections: [{name: count, jmesPath: "length(registries)"}]}`))
	defer s.delete("registries")

	st := waitLoaded(t, s, "registries")
	if !st.Ready || st.Reason != kyvernov2alpha1.ReasonSucceeded || st.LastRefresh.IsZero() || st.Generation != 1 {
		t.Fatalf("status %+v", st)
	}
	if len(calls.calls) != 3 || calls.calls[0].Method != "POST" || calls.calls[0].URL != "https://registry.example/v2" ||
		fmt.Sprint(calls.calls[0].Data) != "map[page:2]" || fmt.Sprint(calls.calls[0].Headers) != "[{Authorization Bearer x}]" {
		t.Errorf("calls %+v", calls.calls)
	}
	ctx := context.Background()
	for key, want := range map[string]string{"registries": "map[registries:[ghcr.io quay.io]]", "registries.count": "2"} {
		if v, err := s.GlobalContextEntry(ctx, key); err != nil || fmt.Sprint(v) != want {
			t.Errorf("%s = %v, %v; want %s", key, v, err, want)
		}
	}
	if _, err := s.GlobalContextEntry(ctx, "registries.nope"); err == nil || err.Error() != `global context entry "registries" has no projection "nope"` {
		t.Errorf("unknown projection: %v", err)
	}
	if _, err := s.GlobalContextEntry(ctx, "other"); !errors.Is(err, loader.ErrGlobalContextEntryNotFound) {
		t.Errorf("unknown entry: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changed) == 0 || changed[len(changed)-1] != "registries" {
		t.Errorf("changes %v", changed)
	}
}

// TestAPICallEntryThatFails: an entry whose call fails every try is an
// error to its readers, naming the call, never empty data.
func TestAPICallEntryThatFails(t *testing.T) {
	calls := &scriptedCalls{answers: []any{errors.New("HTTP 503: down")}}
	s := New(nil, nil, nil, calls, logr.Discard())
	s.retryBackoff = time.Millisecond
	s.set(entryObject(t, "down", 1, `{apiCall: {urlPath: /api/v1/namespaces, retryLimit: 2}}`))
	defer s.delete("down")
	st := waitLoaded(t, s, "down")
	want := "spec.apiCall GET /api/v1/namespaces: 2 tries: HTTP 503: down"
	if st.Ready || st.Stalled || st.Reason != kyvernov2alpha1.ReasonAPICallFailed || st.Message != want {
		t.Fatalf("status %+v", st)
	}
	_, err := s.GlobalContextEntry(context.Background(), "down")
	if !IsFault(err) || errors.Is(err, loader.ErrGlobalContextEntryNotFound) || !strings.Contains(err.Error(), want) {
		t.Errorf("read: %v", err)
	}
}

// TestInvalidEntry: an invalid spec is stalled until its next generation,
// which is loaded afresh.
func TestInvalidEntry(t *testing.T) {
	calls := &scriptedCalls{answers: []any{map[string]any{"a": 1.0}}}
	s := New(nil, nil, nil, calls, logr.Discard())
	s.set(entryObject(t, "e", 1, `{apiCall: {urlPath: /x}, projections: [{name: p, jmesPath: "a["}]}`))
	defer s.delete("e")
	st := waitLoaded(t, s, "e")
	if st.Ready || !st.Stalled || st.Reason != kyvernov2alpha1.ReasonInvalidSpec || !strings.HasPrefix(st.Message, `spec.projections[0].jmesPath: "a[": `) {
		t.Fatalf("status %+v", st)
	}
	if len(calls.calls) != 0 {
		t.Errorf("an invalid entry made calls: %+v", calls.calls)
	}
	s.set(entryObject(t, "e", 2, `{apiCall: {urlPath: /x}, projections: [{name: p, jmesPath: "a"}]}`))
	if st := waitLoaded(t, s, "e"); !st.Ready || st.Generation != 2 {
		t.Fatalf("generation 2: %+v", st)
	}
	if v, err := s.GlobalContextEntry(context.Background(), "e.p"); err != nil || v != 1.0 {
		t.Errorf("e.p = %v, %v", v, err)
	}
}

// TestNamespacedPolicyReads: a namespaced policy reads an entry only while
// it carries charter.dev/readable-by-namespaced-policies: "true"; the
// label takes effect without a new generation, and a cluster-wide policy
// reads the entry either way.
func TestNamespacedPolicyReads(t *testing.T) {
	calls := &scriptedCalls{answers: []any{map[string]any{"token": "s3cret"}}}
	s := New(nil, nil, nil, calls, logr.Discard())
	obj := entryObject(t, "platform", 1, `{apiCall: {urlPath: /api/v1/namespaces/platform/secrets}}`)
	s.set(obj)
	defer s.delete("platform")
	waitLoaded(t, s, "platform")
	ctx := context.Background()

	if v, err := s.GlobalContextEntry(ctx, "platform"); err != nil || fmt.Sprint(v) != "map[token:s3cret]" {
		t.Errorf("cluster-wide read: %v, %v", v, err)
	}
	for _, labels := range []map[string]string{nil, {ReadableByNamespacedPoliciesLabel: "yes"}} {
		obj.SetLabels(labels)
		s.set(obj)
		v, err := s.GlobalContextEntryForNamespace(ctx, "platform", "team-a")
		var nr *NotReadableError
		if v != nil || !errors.As(err, &nr) ||
			err.Error() != `global context entry "platform" is not readable by namespaced policies (this policy is in namespace "team-a"): only an entry labelled charter.dev/readable-by-namespaced-policies: "true" is` {
			t.Errorf("labels %v: read by team-a: %v, %v; want NotReadableError", labels, v, err)
		}
		if _, err := s.GlobalContextEntryForNamespace(ctx, "platform.anything", "team-a"); !errors.As(err, &nr) {
			t.Errorf("labels %v: a projection read by team-a: %v; want NotReadableError", labels, err)
		}
	}
	obj.SetLabels(map[string]string{ReadableByNamespacedPoliciesLabel: "true"})
	s.set(obj)
	if v, err := s.GlobalContextEntryForNamespace(ctx, "platform", "team-a"); err != nil || fmt.Sprint(v) != "map[token:s3cret]" {
		t.Errorf("opted in: read by team-a: %v, %v", v, err)
	}
	if _, err := s.GlobalContextEntryForNamespace(ctx, "missing", "team-a"); !errors.Is(err, loader.ErrGlobalContextEntryNotFound) {
		t.Errorf("missing entry read by team-a: %v; want not found", err)
	}
	if len(calls.calls) != 1 {
		t.Errorf("a label change reloaded the entry: %d calls", len(calls.calls))
	}
}
