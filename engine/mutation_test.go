package engine

import (
	"context"
	"encoding/json"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/mutate"
	"github.com/charter-dev/charter/engine/review"
)

// caseRequest is the admission request a mutate or generate testdata case
// sends through the engine.
type caseRequest struct {
	Operation kyvernov1.AdmissionOperation `json:"operation"`
	Object    map[string]any               `json:"object"`
	OldObject map[string]any               `json:"oldObject"`
}

// mutateCase is one testdata/mutate/*.yaml file: policies run through
// Mutate against one request, with the rule responses, the patched object,
// the admission patch and the patched targets expected.
type mutateCase struct {
	Policies []json.RawMessage `json:"policies"`
	Request  caseRequest       `json:"request"`
	// MutateExisting runs mutate.targets rules against Existing.
	MutateExisting bool             `json:"mutateExisting"`
	Existing       []map[string]any `json:"existing"`
	// ForeachValues pins foreach variables per element index, by rule
	// name (a values file's foreachValues).
	ForeachValues map[string]map[string][]any `json:"foreachValues"`
	Want          []wantedResponse            `json:"want"`
	// Blocked is whether admission must deny the request.
	Blocked bool `json:"blocked"`
	// Object is the patched object; Patch, when set, the exact admission
	// patch; Targets the patched targets in response order.
	Object  map[string]any    `json:"object"`
	Patch   []json.RawMessage `json:"patch"`
	Targets []map[string]any  `json:"targets"`
}

// fixedObjects serves a test's existing objects.
type fixedObjects []map[string]any

func (f fixedObjects) Objects(_ context.Context, q loader.ObjectQuery) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range f {
		if ref := review.RefOf(o); ref.Kind == q.Kind && ref.APIVersion == q.APIVersion {
			out = append(out, o)
		}
	}
	return out, nil
}

func TestMutateTestdata(t *testing.T) {
	eachCase(t, "mutate", func(t *testing.T, tc *mutateCase) {
		set, err := Compile(decodePolicies(t, tc.Policies))
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		opts := []EvalOption{WithLoaders(loader.Loaders{Objects: fixedObjects(tc.Existing)})}
		if tc.MutateExisting {
			opts = append(opts, WithMutateExisting())
		}
		if tc.ForeachValues != nil {
			opts = append(opts, WithValues(fixedValues{foreach: tc.ForeachValues}))
		}
		req := &review.Request{Operation: tc.Request.Operation, Object: tc.Request.Object, OldObject: tc.Request.OldObject}
		before, _ := json.Marshal(req.Object)
		resp := set.Mutate(context.Background(), req, opts...)

		var got []wantedResponse
		var targets []map[string]any
		for _, p := range resp.Policies {
			for _, rr := range p.Rules {
				w := wantedResponse{Policy: p.Key, Rule: rr.Name, Status: string(rr.Status), Message: rr.Message}
				if rr.Target != nil {
					w.Target = rr.Target.APIVersion + "/" + rr.Target.Kind + "/" + rr.Target.Namespace + "/" + rr.Target.Name
				}
				got = append(got, w)
				if rr.PatchedTarget != nil {
					targets = append(targets, rr.PatchedTarget)
				}
			}
		}
		if g, w := dump(t, got), dump(t, tc.Want); g != w {
			t.Errorf("responses:\n got: %s\nwant: %s", g, w)
		}
		if resp.Blocked() != tc.Blocked {
			t.Errorf("Blocked() = %v, want %v", resp.Blocked(), tc.Blocked)
		}
		if tc.Object != nil && !mutate.Equal(resp.Object, tc.Object) {
			t.Errorf("patched object:\n got: %s\nwant: %s", dump(t, resp.Object), dump(t, tc.Object))
		}
		if tc.Targets != nil && !mutate.Equal(toAny(targets), toAny(tc.Targets)) {
			t.Errorf("patched targets:\n got: %s\nwant: %s", dump(t, targets), dump(t, tc.Targets))
		}
		if after, _ := json.Marshal(req.Object); string(after) != string(before) {
			t.Errorf("Mutate modified the request's object")
		}
		// The admission patch must turn the request's object into the
		// patched one.
		applied := req.Object
		if len(resp.Patch) > 0 {
			raw, err := resp.JSONPatch()
			if err != nil {
				t.Fatal(err)
			}
			if applied, err = mutate.JSON6902(req.Object, string(raw)); err != nil {
				t.Fatalf("applying the admission patch: %v", err)
			}
		}
		if !mutate.Equal(applied, resp.Object) {
			t.Errorf("admission patch does not produce the patched object:\n got: %s\nwant: %s", dump(t, applied), dump(t, resp.Object))
		}
		if tc.Patch != nil {
			if g, w := dump(t, resp.Patch), dump(t, tc.Patch); g != w {
				t.Errorf("patch:\n got: %s\nwant: %s", g, w)
			}
		}
	})
}

func toAny(objs []map[string]any) []any {
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

func dump(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// Normalise through a generic value so key order and number forms do
	// not matter.
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(g)
	return string(b)
}
