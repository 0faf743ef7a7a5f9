package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// scopeCase is one testdata/scope/*.yaml file: policies, existing objects,
// and requests, each with the responses every evaluation path must give
// ("policy/rule=status", plus the target of a mutate-existing response).
type scopeCase struct {
	Policies []json.RawMessage `json:"policies"`
	Existing []map[string]any  `json:"existing"`
	// ConfigMaps are keyed "namespace/name"; APICalls by URL path.
	ConfigMaps map[string]map[string]any `json:"configMaps"`
	APICalls   map[string]any            `json:"apiCalls"`
	// GlobalContext holds entries by name; only those OpenToNamespaced
	// are served to namespaced policies.
	GlobalContext map[string]scopedGlobalEntry `json:"globalContext"`
	Cases         []struct {
		Name    string `json:"name"`
		Request struct {
			caseRequest `json:",inline"`
			Namespace   string `json:"namespace"`
		} `json:"request"`
		Validate []string `json:"validate"`
		Mutate   []string `json:"mutate"`
		Generate []string `json:"generate"`
		// LeftOut are the keys of policies the index must leave out of
		// the request's candidates.
		LeftOut []string `json:"leftOut"`
	} `json:"cases"`
}

// TestNamespacedPolicyScope runs each request through every evaluation
// entry point (Validate, Evaluate, Mutate with mutate-existing, Generate,
// and the single-policy Validate and Mutate) and checks each agrees on
// which policies saw it.
func TestNamespacedPolicyScope(t *testing.T) {
	files, _ := filepath.Glob("testdata/scope/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var sc scopeCase
		if err := yaml.UnmarshalStrict(data, &sc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		set, err := Compile(decodePolicies(t, sc.Policies))
		if err != nil {
			t.Fatalf("%s: compile: %v", file, err)
		}
		loaders := loader.Loaders{Objects: fixedObjects(sc.Existing), ConfigMaps: fakeConfigMaps(sc.ConfigMaps), APICalls: fakeAPI(sc.APICalls),
			GlobalContext: scopedGlobalContext(sc.GlobalContext)}
		opts := []EvalOption{WithLoaders(loaders), WithMutateExisting()}
		for _, c := range sc.Cases {
			t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml")+"/"+c.Name, func(t *testing.T) {
				ctx := context.Background()
				req := &review.Request{Operation: c.Request.Operation, Object: c.Request.Object, OldObject: c.Request.OldObject, Namespace: c.Request.Namespace}
				if req.Operation == "" {
					req.Operation = kyvernov1.Create
				}
				validated := responseLines(set.Validate(ctx, req, opts...).Policies)
				checkLines(t, "Validate", validated, c.Validate)
				checkLines(t, "Evaluate", responseLines(set.Evaluate(ctx, req, opts...).Validation.Policies), c.Validate)
				mutated := set.Mutate(ctx, req, opts...)
				checkLines(t, "Mutate", responseLines(mutated.Policies), c.Mutate)
				checkLines(t, "Generate", responseLines(set.Generate(ctx, req, opts...).Policies), c.Generate)

				var one, oneMutate []review.PolicyResponse
				for _, p := range set.Policies() {
					if pr := p.Validate(ctx, req, opts...); len(pr.Rules) > 0 {
						one = append(one, pr)
					}
					if pr := p.Mutate(ctx, req, opts...); len(pr.Rules) > 0 {
						oneMutate = append(oneMutate, pr)
					}
				}
				checkLines(t, "Policy.Validate", responseLines(one), c.Validate)
				checkLines(t, "Policy.Mutate", responseLines(oneMutate), c.Mutate)
				checkCandidates(t, set, req, c.LeftOut)
			})
		}
	}
}

// checkCandidates checks the policy index for the request: it leaves out
// the policies named, and only policies that cannot respond (out of
// scope, or no rule selecting the request).
func checkCandidates(t *testing.T, set *PolicySet, req *review.Request, leftOut []string) {
	t.Helper()
	in := newRequestView(context.Background(), req, &review.Options{})
	candidates := set.candidates(in)
	for _, key := range leftOut {
		if !slices.ContainsFunc(set.Policies(), func(p *Policy) bool { return p.key == key }) {
			t.Errorf("policy index: no policy %s to leave out", key)
		}
	}
	for _, p := range set.Policies() {
		if slices.Contains(candidates, p) {
			if slices.Contains(leftOut, p.key) {
				t.Errorf("policy index: %s is a candidate, want it left out", p.key)
			}
			continue
		}
		if p.scopes(in) && p.cpol.Selects(&in.Res) {
			t.Errorf("policy index left out %s, whose rules select the request", p.key)
		}
	}
}

type scopedGlobalEntry struct {
	Data             any  `json:"data"`
	OpenToNamespaced bool `json:"openToNamespaced"`
}

// scopedGlobalContext is a NamespacedGlobalContext as the cluster's store
// decides: a namespaced policy reads only the entries open to it.
type scopedGlobalContext map[string]scopedGlobalEntry

func (g scopedGlobalContext) GlobalContextEntry(ctx context.Context, name string) (any, error) {
	e, ok := g[name]
	if !ok {
		return nil, loader.ErrGlobalContextEntryNotFound
	}
	return e.Data, nil
}

func (g scopedGlobalContext) GlobalContextEntryForNamespace(ctx context.Context, name, namespace string) (any, error) {
	if e, ok := g[name]; ok && !e.OpenToNamespaced {
		return nil, errors.New("not open to namespaced policies")
	}
	return g.GlobalContextEntry(ctx, name)
}

func responseLines(policies []review.PolicyResponse) []string {
	var out []string
	for _, p := range policies {
		for _, r := range p.Rules {
			line := p.Key + "/" + r.Name + "=" + string(r.Status)
			if r.Target != nil {
				line += " " + r.Target.APIVersion + "/" + r.Target.String()
			}
			out = append(out, line)
		}
	}
	return out
}

func checkLines(t *testing.T, path string, got, want []string) {
	t.Helper()
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", path, got, want)
	}
}
