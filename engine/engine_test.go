package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/internal/testcases"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// validateCase is one testdata/validate/*.yaml file: policies (and
// exceptions) evaluated against one request, with the rule responses
// expected.
type validateCase struct {
	Policies   []json.RawMessage            `json:"policies"`
	Exceptions []*kyvernov2.PolicyException `json:"exceptions"`
	Request    struct {
		Operation       kyvernov1.AdmissionOperation `json:"operation"`
		Object          map[string]any               `json:"object"`
		OldObject       map[string]any               `json:"oldObject"`
		SubResource     string                       `json:"subResource"`
		NamespaceLabels map[string]string            `json:"namespaceLabels"`
		UserInfo        authenticationv1.UserInfo    `json:"userInfo"`
		Roles           []string                     `json:"roles"`
		ClusterRoles    []string                     `json:"clusterRoles"`
		Resource        schema.GroupVersionResource  `json:"resource"`
	} `json:"request"`
	// Authorizer, when set, answers the CEL authorizer's checks.
	Authorizer fakeAuthorizer `json:"authorizer"`
	// ConfigMaps are keyed "namespace/name"; APICalls by URL path.
	ConfigMaps map[string]map[string]any `json:"configMaps"`
	APICalls   map[string]any            `json:"apiCalls"`
	// Objects are existing objects (validate.cel params).
	Objects []map[string]any `json:"objects"`
	// Values pins variables for every policy and resource, and context
	// entries for every rule.
	Values        map[string]any `json:"values"`
	ContextValues map[string]any `json:"contextValues"`
	// ForeachValues pins foreach variables per element index, by rule
	// name (a values file's foreachValues).
	ForeachValues map[string]map[string][]any `json:"foreachValues"`
	Want          []wantedResponse            `json:"want"`
}

type wantedResponse struct {
	Policy     string `json:"policy"`
	Rule       string `json:"rule"`
	Status     string `json:"status"`
	Message    string `json:"message,omitempty"`
	Action     string `json:"action,omitempty"`
	Exceptions string `json:"exceptions,omitempty"`
	// Target names the existing resource of a mutate-existing response.
	Target string `json:"target,omitempty"`
}

func decodePolicies(t testing.TB, raws []json.RawMessage) []kyvernov1.PolicyInterface {
	t.Helper()
	var out []kyvernov1.PolicyInterface
	for _, raw := range raws {
		var probe struct{ Kind string }
		if err := json.Unmarshal(raw, &probe); err != nil {
			t.Fatal(err)
		}
		var p kyvernov1.PolicyInterface
		switch probe.Kind {
		case "ClusterPolicy":
			p = &kyvernov1.ClusterPolicy{}
		case "Policy":
			p = &kyvernov1.Policy{}
		default:
			t.Fatalf("unexpected kind %q", probe.Kind)
		}
		if err := json.Unmarshal(raw, p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

type fakeConfigMaps map[string]map[string]any

func (f fakeConfigMaps) ConfigMap(_ context.Context, ns, name string) (map[string]any, error) {
	cm, ok := f[ns+"/"+name]
	if !ok {
		return nil, fmt.Errorf("configmaps %q not found", name)
	}
	return cm, nil
}

// fakeAPI answers apiCall context entries by their urlPath.
type fakeAPI = testcases.APIPaths

// fixedValues pins the same variables for every policy and resource, the
// same context entries for every rule, and foreach values by rule name.
type fixedValues struct {
	vars, entries map[string]any
	foreach       map[string]map[string][]any
}

func (v fixedValues) Variables(kyvernov1.PolicyInterface, review.ResourceRef) map[string]any {
	return v.vars
}
func (v fixedValues) ContextEntries(kyvernov1.PolicyInterface, string) map[string]any {
	return v.entries
}
func (v fixedValues) ForeachElements(_ kyvernov1.PolicyInterface, rule string) map[string][]any {
	return v.foreach[rule]
}

// request is the admission request a validate case describes.
func (tc *validateCase) request() *review.Request {
	return &review.Request{
		Operation: tc.Request.Operation, Object: tc.Request.Object, OldObject: tc.Request.OldObject,
		SubResource: tc.Request.SubResource, NamespaceLabels: tc.Request.NamespaceLabels,
		UserInfo: tc.Request.UserInfo, Roles: tc.Request.Roles, ClusterRoles: tc.Request.ClusterRoles,
		Resource: tc.Request.Resource,
	}
}

func TestValidateTestdata(t *testing.T) {
	eachCase(t, "validate", func(t *testing.T, tc *validateCase) {
		set, err := Compile(decodePolicies(t, tc.Policies), WithExceptions(tc.Exceptions))
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		req := tc.request()
		loaders := loader.Loaders{ConfigMaps: fakeConfigMaps(tc.ConfigMaps), APICalls: fakeAPI(tc.APICalls)}
		if tc.Objects != nil {
			loaders.Objects = fixedObjects(tc.Objects)
		}
		if tc.Authorizer != nil {
			loaders.Authorizer = tc.Authorizer
		}
		opts := []EvalOption{WithLoaders(loaders)}
		if tc.Values != nil || tc.ContextValues != nil || tc.ForeachValues != nil {
			opts = append(opts, WithValues(fixedValues{tc.Values, tc.ContextValues, tc.ForeachValues}))
		}
		resp := set.Validate(context.Background(), req, opts...)
		var got []wantedResponse
		for _, p := range resp.Policies {
			for _, r := range p.Rules {
				w := wantedResponse{Policy: p.Key, Rule: r.Name, Status: string(r.Status), Message: r.Message, Action: string(r.Action)}
				var names []string
				for _, e := range r.Exceptions {
					names = append(names, e.Name)
				}
				w.Exceptions = strings.Join(names, ",")
				got = append(got, w)
			}
		}
		compareResponses(t, got, tc.Want)
	})
}

// compareResponses checks every wanted response; a wanted message or
// action that is empty is not compared. Responses not wanted are errors.
func compareResponses(t *testing.T, got, want []wantedResponse) {
	t.Helper()
	key := func(w wantedResponse) string { return w.Policy + "/" + w.Rule }
	byKey := map[string]wantedResponse{}
	for _, g := range got {
		byKey[key(g)] = g
	}
	for _, w := range want {
		g, ok := byKey[key(w)]
		if !ok {
			t.Errorf("%s: no response, want %s", key(w), w.Status)
			continue
		}
		delete(byKey, key(w))
		if g.Status != w.Status {
			t.Errorf("%s: status %s (%q), want %s", key(w), g.Status, g.Message, w.Status)
		}
		if w.Message != "" && g.Message != w.Message {
			t.Errorf("%s: message\n got %q\nwant %q", key(w), g.Message, w.Message)
		}
		if w.Action != "" && g.Action != w.Action {
			t.Errorf("%s: action %s, want %s", key(w), g.Action, w.Action)
		}
		if g.Exceptions != w.Exceptions {
			t.Errorf("%s: exceptions %q, want %q", key(w), g.Exceptions, w.Exceptions)
		}
	}
	var extra []string
	for k, g := range byKey {
		extra = append(extra, fmt.Sprintf("%s=%s (%q)", k, g.Status, g.Message))
	}
	sort.Strings(extra)
	for _, e := range extra {
		t.Errorf("unexpected response %s", e)
	}
}

// compileCase is one testdata/compile/*.yaml file: policies and the exact
// compile errors expected.
type compileCase struct {
	Policies   []json.RawMessage            `json:"policies"`
	Exceptions []*kyvernov2.PolicyException `json:"exceptions"`
	Errors     []string                     `json:"errors"`
}

func TestCompileErrorsTestdata(t *testing.T) {
	eachCase(t, "compile", func(t *testing.T, tc *compileCase) {
		_, err := Compile(decodePolicies(t, tc.Policies), WithExceptions(tc.Exceptions))
		var got []string
		if err != nil {
			errs, ok := err.(fault.List)
			if !ok {
				t.Fatalf("error is %T, want fault.List", err)
			}
			for _, e := range errs {
				got = append(got, e.Error())
			}
		}
		sort.Strings(got)
		want := append([]string(nil), tc.Errors...)
		sort.Strings(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("errors\n got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	})
}

// TestCompileLeavesPoliciesUntouched: `charter test` compiles the same
// policy objects into several sets at once, and gitsync applies them as
// written, so Compile (autogen included) must never write into them.
func TestCompileLeavesPoliciesUntouched(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tc struct {
			Policies []json.RawMessage `json:"policies"`
		}
		if err := yaml.Unmarshal(data, &tc); err != nil {
			t.Fatal(err)
		}
		policies := decodePolicies(t, tc.Policies)
		before, err := json.Marshal(policies)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = Compile(policies)
		after, _ := json.Marshal(policies)
		if string(before) != string(after) {
			t.Errorf("%s: Compile modified its policies", file)
		}
	}
}
