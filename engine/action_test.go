package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// actionCase is one testdata/action/*.yaml file: policies, and the
// effective action of every validate rule for a Pod in each namespace.
type actionCase struct {
	Policies []json.RawMessage `json:"policies"`
	Cases    []struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		// NamespaceLabels are carried by the request; LoaderLabels are
		// served by Loaders.Namespaces instead.
		NamespaceLabels map[string]string `json:"namespaceLabels"`
		LoaderLabels    map[string]string `json:"loaderLabels"`
		// Want maps "policy key/rule" to Audit or Enforce; every rule
		// response must be listed.
		Want map[string]string `json:"want"`
	} `json:"cases"`
}

// namespaceLabels serves the labels of one namespace and counts lookups.
type namespaceLabels struct {
	namespace string
	labels    map[string]string
	lookups   int
}

func (n *namespaceLabels) NamespaceLabels(_ context.Context, ns string) (map[string]string, error) {
	n.lookups++
	if ns != n.namespace {
		return nil, fmt.Errorf("namespaces %q not found", ns)
	}
	return n.labels, nil
}

func TestActionTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/action/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tc actionCase
		if err := yaml.UnmarshalStrict(data, &tc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		set, err := Compile(decodePolicies(t, tc.Policies))
		if err != nil {
			t.Fatalf("%s: compile: %v", file, err)
		}
		for _, c := range tc.Cases {
			t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml")+"/"+c.Name, func(t *testing.T) {
				pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
					"metadata": map[string]any{"name": "p", "namespace": c.Namespace}}
				req := &review.Request{Object: pod, NamespaceLabels: c.NamespaceLabels}
				nsLoader := &namespaceLabels{namespace: c.Namespace, labels: c.LoaderLabels}
				resp := set.Validate(context.Background(), req, WithLoaders(loader.Loaders{Namespaces: nsLoader}))
				got := map[string]string{}
				for _, p := range resp.Policies {
					for _, r := range p.Rules {
						got[p.Key+"/"+r.Name] = string(r.Action)
					}
				}
				for k, want := range c.Want {
					if g, ok := got[k]; !ok {
						t.Errorf("%s: no response, want action %s", k, want)
					} else if g != want {
						t.Errorf("%s: action %s, want %s", k, g, want)
					}
					delete(got, k)
				}
				for k, g := range got {
					t.Errorf("unexpected response %s (action %s)", k, g)
				}
				if c.NamespaceLabels != nil && nsLoader.lookups > 0 {
					t.Errorf("namespace labels looked up %d times although the request carries them", nsLoader.lookups)
				}
			})
		}
	}
}

// TestActionLooksUpNamespaceOnlyForStaged: an unstaged policy without
// namespaceSelectors never costs a namespace lookup.
func TestActionLooksUpNamespaceOnlyForStaged(t *testing.T) {
	policy := []byte(`{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"plain"},
	  "spec":{"rules":[{"name":"r","match":{"any":[{"resources":{"kinds":["Pod"]}}]},
	  "validate":{"message":"m","pattern":{"metadata":{"name":"?*"}}}}]}}`)
	set, err := Compile(decodePolicies(t, []json.RawMessage{policy}))
	if err != nil {
		t.Fatal(err)
	}
	nsLoader := &namespaceLabels{namespace: "a", labels: map[string]string{"charter.dev/enforcement": "enforce"}}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "a"}}
	resp := set.Validate(context.Background(), &review.Request{Object: pod}, WithLoaders(loader.Loaders{Namespaces: nsLoader}))
	if n := len(resp.Policies); n != 1 || resp.Policies[0].Rules[0].Action != review.Audit {
		t.Fatalf("responses %+v, want one Audit rule", resp.Policies)
	}
	if nsLoader.lookups != 0 {
		t.Errorf("namespace labels looked up %d times for an unstaged policy", nsLoader.lookups)
	}
}
