package server

import (
	"encoding/json"
	"testing"
)

// backgroundRecords keeps what the validating handler hands the
// background controller.
type backgroundRecords struct{ recs []BackgroundRecord }

func (b *backgroundRecords) Admitted(rec BackgroundRecord) bool {
	b.recs = append(b.recs, rec)
	return true
}

// withOptions adds the request's options to a review.
func withOptions(t *testing.T, body []byte, options map[string]any) []byte {
	t.Helper()
	var review map[string]any
	if err := json.Unmarshal(body, &review); err != nil {
		t.Fatal(err)
	}
	review["request"].(map[string]any)["options"] = options
	out, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBackgroundRecords: an admitted request reaches the background
// controller's UpdateRequests with the field manager of its options (how
// admission knows the controller's own writes); a dry run never does.
func TestBackgroundRecords(t *testing.T) {
	for _, tc := range []struct {
		name             string
		dryRun           bool
		options          map[string]any
		wantRecords      int
		wantFieldManager string
	}{
		{name: "apply by the background controller", options: map[string]any{"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "charter-background", "force": true},
			wantRecords: 1, wantFieldManager: "charter-background"},
		{name: "create by kubectl", options: map[string]any{"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-create"},
			wantRecords: 1, wantFieldManager: "kubectl-create"},
		{name: "no options", wantRecords: 1},
		{name: "dry run", dryRun: true, options: map[string]any{"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": []any{"All"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &backgroundRecords{}
			h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}, Background: sink})
			p := compliant()
			p.dryRun = tc.dryRun
			body := p.review()
			if tc.options != nil {
				body = withOptions(t, body, tc.options)
			}
			if resp := decision(t, h, PathValidateFail, body); !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if len(sink.recs) != tc.wantRecords {
				t.Fatalf("%d background records, want %d", len(sink.recs), tc.wantRecords)
			}
			if tc.wantRecords > 0 && sink.recs[0].FieldManager != tc.wantFieldManager {
				t.Errorf("field manager %q, want %q", sink.recs[0].FieldManager, tc.wantFieldManager)
			}
		})
	}
}
