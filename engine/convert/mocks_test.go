package convert

import "testing"

// TestSuiteMocksFeedClusterReads: a suite's values for a context entry
// (the rule's, dotted keys under the entry, or per resource by name)
// become the CEL that stands for the converted resource.Get/List read.
func TestSuiteMocksFeedClusterReads(t *testing.T) {
	const read = "resource.Get('v1', 'namespaces', '', request.namespace)"
	mocks := &Mocks{
		Global: map[string]any{"unrelated": "x"},
		Rules: map[string]map[string]map[string]any{"p": {
			"count":  {"quotas": "1"},
			"text":   {"quotas": "1"},
			"dotted": {"cm.data.allowed": "a,b", "cm.metadata.name": "cm"},
		}},
		Resources: map[string]map[string]map[string]any{"q": {
			"pod-b": {"ns": map[string]any{"team": "b"}},
			"pod-a": {"ns": map[string]any{}},
		}},
	}
	cases := []struct {
		name, source string
		read         ClusterRead
		want         string
		mocked       bool
	}{
		{"a count's text mock is a number", "p", ClusterRead{Rule: "count", Variable: "quotas", Numeric: true}, "1", true},
		{"other text stays text", "p", ClusterRead{Rule: "text", Variable: "quotas"}, "'1'", true},
		{"dotted keys build the object", "p", ClusterRead{Rule: "dotted", Variable: "cm"}, "{'data': dyn({'allowed': 'a,b'}), 'metadata': dyn({'name': 'cm'})}", true},
		{"per-resource mocks are chosen by name", "q", ClusterRead{Rule: "r", Variable: "ns"}, "{'pod-a': {}, 'pod-b': {'team': 'b'}}[?object.metadata.name].orValue(" + read + ")", true},
		{"an unmocked read stays", "p", ClusterRead{Rule: "other", Variable: "quotas"}, read, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, mocked, err := mocks.mocked(c.read, c.source, read)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want || mocked != c.mocked {
				t.Errorf("got %q (mocked %v), want %q (mocked %v)", got, mocked, c.want, c.mocked)
			}
		})
	}
}
