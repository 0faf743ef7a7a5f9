package v1_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/api/strict"
)

func TestStrictDecode(t *testing.T) {
	tests := []struct {
		file    string
		obj     any
		wantErr string // "" means the file decodes
	}{
		{"misspelt-field.yaml", &kyvernov1.ClusterPolicy{}, `unknown field "spec.validationFailureActon"`},
		{"misspelt-nested-field.yaml", &kyvernov1.Policy{}, `unknown field "spec.rules[0].match.any[0].resources.namespace"`},
		{"unknown-in-pattern.yaml", &kyvernov1.ClusterPolicy{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			err = strict.Unmarshal(data, tt.obj)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("strict.Unmarshal() = %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("strict.Unmarshal() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
