package controlplane

import (
	"strings"
	"testing"
)

func TestReadCRDs(t *testing.T) {
	tests := []struct {
		name      string
		paths     []string
		wantNames []string
		wantErr   string
	}{
		{
			name:      "folder with a multi-document file",
			paths:     []string{"testdata/crds"},
			wantNames: []string{"widgets.test.charter.dev", "gadgets.test.charter.dev"},
		},
		{
			name:      "single file",
			paths:     []string{"testdata/crds/widgets.yaml"},
			wantNames: []string{"widgets.test.charter.dev", "gadgets.test.charter.dev"},
		},
		{
			name:    "another kind in the folder",
			paths:   []string{"testdata/notcrd"},
			wantErr: "testdata/notcrd/configmap.yaml: document 1: expected an apiextensions.k8s.io/v1 CustomResourceDefinition, found v1 ConfigMap",
		},
		{
			name:    "folder without CRDs",
			paths:   []string{"testdata/empty"},
			wantErr: "no CustomResourceDefinition found in testdata/empty",
		},
		{
			name:    "missing folder",
			paths:   []string{"testdata/nowhere"},
			wantErr: "testdata/nowhere: no such file or directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crds, err := ReadCRDs(tt.paths...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ReadCRDs(%v) error = %v, want one containing %q", tt.paths, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadCRDs(%v): %v", tt.paths, err)
			}
			var names []string
			for _, c := range crds {
				names = append(names, c.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
				t.Errorf("ReadCRDs(%v) = %v, want %v", tt.paths, names, tt.wantNames)
			}
		})
	}
}
