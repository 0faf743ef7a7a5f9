package generate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// generateCase is one testdata/generate/*.yaml file: a rule, the trigger it
// fires for, the cluster objects it may clone, and the desired objects
// expected (or an error).
type generateCase struct {
	// About says what the case shows, and which spec row it reproduces.
	About   string           `json:"about"`
	Policy  PolicyRef        `json:"policy"`
	Rule    kyvernov1.Rule   `json:"rule"`
	Trigger map[string]any   `json:"trigger"`
	Sources []map[string]any `json:"sources,omitempty"`
	Want    []wantObject     `json:"want,omitempty"`
	// WantError lists substrings of the expected error; the objects in Want
	// are still expected (foreach returns the elements that succeeded).
	WantError []string `json:"wantError,omitempty"`
	// WantNotFound: the error is a NotFound from the cluster objects.
	WantNotFound bool `json:"wantNotFound,omitempty"`
}

type wantObject struct {
	From                           SourceType     `json:"from"`
	Synchronize                    bool           `json:"synchronize,omitempty"`
	OrphanDownstreamOnPolicyDelete bool           `json:"orphan,omitempty"`
	Source                         *refYAML       `json:"source,omitempty"`
	ForEach                        *Position      `json:"forEach,omitempty"`
	Object                         map[string]any `json:"object"`
}

type refYAML struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

func TestGenerate(t *testing.T) {
	for _, file := range testdataFiles(t, "generate") {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			var tc generateCase
			readYAML(t, file, &tc)
			if tc.About == "" {
				t.Fatal("case has no about")
			}
			if err := Check(&tc.Rule, CheckOptions{PolicyNamespace: tc.Policy.Namespace}); err != nil {
				t.Fatalf("Check rejects the rule: %v", err)
			}
			doc := triggerDocument(t, tc.Trigger, &tc.Rule)
			env := Env{Objects: NewObjects(tc.Sources...)}
			got, err := Generate(context.Background(), tc.Policy, &tc.Rule, RefOf(tc.Trigger), doc, env)
			switch {
			case len(tc.WantError) == 0 && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case len(tc.WantError) > 0 && err == nil:
				t.Fatalf("want an error containing %q, got none", tc.WantError)
			}
			for _, s := range tc.WantError {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if tc.WantNotFound && !apierrors.IsNotFound(err) {
				t.Errorf("want a NotFound error, got %v", err)
			}
			if len(got) != len(tc.Want) {
				t.Fatalf("got %d objects, want %d: %s", len(got), len(tc.Want), diffJSON(t, objectsOf(got), tc.Want))
			}
			for i := range got {
				g, w := &got[i], &tc.Want[i]
				if d := diffJSON(t, g.Object, w.Object); d != "" {
					t.Errorf("object %d:\n%s", i, d)
				}
				if g.From != w.From || g.Synchronize != w.Synchronize || g.OrphanDownstreamOnPolicyDelete != w.OrphanDownstreamOnPolicyDelete {
					t.Errorf("object %d: from=%s synchronize=%v orphan=%v, want from=%s synchronize=%v orphan=%v", i,
						g.From, g.Synchronize, g.OrphanDownstreamOnPolicyDelete, w.From, w.Synchronize, w.OrphanDownstreamOnPolicyDelete)
				}
				if d := diffJSON(t, refOrNil(g.Source), w.Source); d != "" {
					t.Errorf("object %d source:\n%s", i, d)
				}
				if d := diffJSON(t, g.ForEach, w.ForEach); d != "" {
					t.Errorf("object %d foreach position:\n%s", i, d)
				}
				if g.Policy != tc.Policy || g.Rule != tc.Rule.Name || g.Trigger != RefOf(tc.Trigger) {
					t.Errorf("object %d: policy %v rule %q trigger %v, want %v %q %v", i, g.Policy, g.Rule, g.Trigger, tc.Policy, tc.Rule.Name, RefOf(tc.Trigger))
				}
			}
		})
	}
}

func objectsOf(ds []DesiredObject) []map[string]any {
	out := make([]map[string]any, len(ds))
	for i := range ds {
		out[i] = ds[i].Object
	}
	return out
}

func refOrNil(r *ObjectRef) *refYAML {
	if r == nil {
		return nil
	}
	return &refYAML{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: string(r.UID)}
}
