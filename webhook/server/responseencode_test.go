package server

import (
	"bytes"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appendResponse writes what encoding/json's Encoder writes, and leaves
// the responses it does not know to it.
func TestAppendResponseMatchesEncoder(t *testing.T) {
	patchType := admissionv1.PatchTypeJSONPatch
	for _, tc := range []struct {
		name string
		resp *admissionv1.AdmissionResponse
		// left is whether appendResponse must leave it to the Encoder.
		left bool
	}{
		{name: "allowed", resp: allowed("705ab4f5-6393-11e8-b7cc-42010a800002", nil)},
		{name: "allowed with warnings", resp: allowed("u", []string{"policy a.b: plain", `policy c.d: "quoted" <html> & more`, "tab\there é \u2028"})},
		{name: "denied", resp: denied("u", blockedMessageForTest)},
		{name: "denied, empty message", resp: denied("u", "")},
		{name: "uid to escape", resp: allowed(`u"<>`, nil)},
		{name: "patched", resp: &admissionv1.AdmissionResponse{UID: "u", Allowed: true, Patch: []byte(`[{"op":"add","path":"/a","value":1}]`), PatchType: &patchType}},
		{name: "status with a code", resp: &admissionv1.AdmissionResponse{UID: "u", Result: &metav1.Status{Status: "Failure", Code: 403}}, left: true},
		{name: "audit annotations", resp: &admissionv1.AdmissionResponse{UID: "u", Allowed: true, AuditAnnotations: map[string]string{"a": "b"}}, left: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got bytes.Buffer
			ok := appendResponse(&got, tc.resp)
			if ok == tc.left {
				t.Fatalf("appendResponse took it: %v, want %v", ok, !tc.left)
			}
			if !ok {
				return
			}
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(reviewResponse{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview", Response: tc.resp}); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("appendResponse\n%s\nEncoder\n%s", got.String(), want.String())
			}
		})
	}
}

const blockedMessageForTest = "\n\nresource Pod/default/nginx was blocked due to the following policies \n\n" +
	"disallow-latest-tag:\n  require-image-tag: 'validation error: An image tag is required. rule require-image-tag failed at path /spec/containers/0/image/'\n"
