package server

import (
	"bytes"
	"encoding/json"
	"strings"
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

// TestAppendJSONStringMatchesMarshal: every byte that encoding/json
// escapes, invalid UTF-8, the separators it escapes and runes it keeps.
func TestAppendJSONStringMatchesMarshal(t *testing.T) {
	var all strings.Builder
	for b := range 0x80 {
		all.WriteByte(byte(b))
	}
	for _, s := range []string{"", "plain", all.String(), "a\nb\r\tc\b\f\x00\x1f\x7f", `"quoted" \ back`, "<html> & more",
		"é ü 日本 \u2028 \u2029 \u2027 \u202a 😀", "bad \xff utf8 \xe2\x80", "\xc3", "end\xe2\x80\xa8"} {
		var got bytes.Buffer
		appendJSONString(&got, s)
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Errorf("appendJSONString(%q) = %s, json.Marshal gives %s", s, got.String(), want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("a\n<b>\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		var got bytes.Buffer
		appendJSONString(&got, s)
		want, _ := json.Marshal(s)
		if got.String() != string(want) {
			t.Errorf("appendJSONString(%q) = %s, json.Marshal gives %s", s, got.String(), want)
		}
	})
}
