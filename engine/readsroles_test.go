package engine

import (
	"encoding/json"
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReadsRoles compiles the policies of testdata/roles and checks which
// need the requester's roles: matching or excluding by roles or
// clusterRoles, or reading request.roles or request.clusterRoles anywhere
// in a rule.
func TestReadsRoles(t *testing.T) {
	data, err := os.ReadFile("testdata/roles/cases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name       string          `json:"name"`
			ReadsRoles bool            `json:"readsRoles"`
			Policy     json.RawMessage `json:"policy"`
		} `json:"cases"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		t.Fatal(err)
	}
	for _, tc := range file.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			u := NewCompiler().Policy(decodePolicies(t, []json.RawMessage{tc.Policy})[0])
			if len(u.Errors()) > 0 {
				t.Fatalf("does not compile: %v", u.Errors())
			}
			if got := u.policy.ReadsRoles(); got != tc.ReadsRoles {
				t.Errorf("ReadsRoles() = %v, want %v", got, tc.ReadsRoles)
			}
		})
	}
}
