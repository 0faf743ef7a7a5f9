package admission

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestUpdateRequestIsJudgedByItsSchemaOnly: Kyverno 1.19 validates no
// UpdateRequest when it is written (the type has no Validate method and
// no webhook is asked: UpdateRequests are its controllers' own work
// items); neither does charter: its policy webhook does not match them
// (webhook/config TestPolicyWebhookMatchesEveryServedVersion leaves them
// out), and the real API server refuses, by the CRD schema alone, what
// the schema refuses: an unknown requestType, a missing spec.policy. A
// well-formed one is created.
func TestUpdateRequestIsJudgedByItsSchemaOnly(t *testing.T) {
	f := startAdmission(t)
	ur := func(spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kyverno.io/v2", "kind": "UpdateRequest",
			"metadata": map[string]any{"generateName": "ur-", "namespace": charterNamespace},
			"spec":     spec,
		}}
		return u
	}
	for _, tc := range []struct {
		name, field string
		spec        map[string]any
	}{
		{"unknown requestType", "spec.requestType", map[string]any{"requestType": "delete", "policy": "p"}},
		{"no policy", "spec.policy", map[string]any{"requestType": "generate"}},
	} {
		err := f.client.Create(f.ctx, ur(tc.spec))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want the schema's refusal naming %s", tc.name, err, tc.field)
		}
	}
	good := ur(map[string]any{"requestType": "generate", "policy": "p"})
	if err := f.client.Create(f.ctx, good); err != nil {
		t.Fatalf("a well-formed UpdateRequest: %v", err)
	}
	_ = f.client.Delete(f.ctx, good)
}
