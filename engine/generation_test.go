package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/mutate"
	"github.com/charter-dev/charter/engine/review"
)

// generateCase is one testdata/generate/*.yaml file: policies run through
// Generate for one trigger, with the rule responses and desired objects
// expected. An expected object without labels is compared without its
// labels.
type generateCase struct {
	Policies []json.RawMessage `json:"policies"`
	Request  caseRequest       `json:"request"`
	Existing []map[string]any  `json:"existing"`
	// CLIGeneration generates as Kyverno's CLI does (WithCLIGeneration).
	CLIGeneration bool `json:"cliGeneration"`
	// ForeachValues pins foreach variables per element index, by rule
	// name (a values file's foreachValues).
	ForeachValues map[string]map[string][]any `json:"foreachValues"`
	Want          []wantedResponse            `json:"want"`
	Generated     []struct {
		Synchronize bool           `json:"synchronize"`
		Object      map[string]any `json:"object"`
	} `json:"generated"`
}

func TestGenerateTestdata(t *testing.T) {
	eachCase(t, "generate", func(t *testing.T, tc *generateCase) {
		set, err := Compile(decodePolicies(t, tc.Policies))
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		req := &review.Request{Operation: tc.Request.Operation, Object: tc.Request.Object, OldObject: tc.Request.OldObject}
		opts := []EvalOption{WithLoaders(loader.Loaders{Objects: fixedObjects(tc.Existing)})}
		if tc.CLIGeneration {
			opts = append(opts, WithCLIGeneration())
		}
		if tc.ForeachValues != nil {
			opts = append(opts, WithValues(fixedValues{foreach: tc.ForeachValues}))
		}
		resp := set.Generate(context.Background(), req, opts...)
		var got []wantedResponse
		for _, p := range resp.Policies {
			for _, rr := range p.Rules {
				got = append(got, wantedResponse{Policy: p.Key, Rule: rr.Name, Status: string(rr.Status), Message: rr.Message})
			}
		}
		if g, w := dump(t, got), dump(t, tc.Want); g != w {
			t.Errorf("responses:\n got: %s\nwant: %s", g, w)
		}
		objs := resp.Objects()
		if len(objs) != len(tc.Generated) {
			t.Fatalf("got %d generated objects, want %d: %s", len(objs), len(tc.Generated), dump(t, objs))
		}
		for i, want := range tc.Generated {
			got := objs[i]
			if got.Synchronize != want.Synchronize {
				t.Errorf("object %d: synchronize %v, want %v", i, got.Synchronize, want.Synchronize)
			}
			obj := got.Object
			if meta, _ := want.Object["metadata"].(map[string]any); meta["labels"] == nil {
				obj = withoutLabels(obj)
			}
			if !mutate.Equal(obj, want.Object) {
				t.Errorf("object %d:\n got: %s\nwant: %s", i, dump(t, obj), dump(t, want.Object))
			}
		}
	})
}

func withoutLabels(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	meta, _ := obj["metadata"].(map[string]any)
	m := make(map[string]any, len(meta))
	for k, v := range meta {
		if k != "labels" {
			m[k] = v
		}
	}
	out["metadata"] = m
	return out
}
