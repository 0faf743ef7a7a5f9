package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appendResponse writes the reply to buf exactly as encoding/json's
// Encoder writes reviewResponse, for the decisions the handlers make:
// allowed with warnings, or denied with a Status of status and message
// (allowed and denied), and for a mutation, a patch. It reports false,
// having written nothing usable, for any other field set; the caller then
// uses the Encoder. Reflection over AdmissionResponse and its Status was
// most of the cost of answering.
func appendResponse(buf *bytes.Buffer, r *admissionv1.AdmissionResponse) bool {
	if len(r.AuditAnnotations) > 0 || (r.Result != nil && !plainStatus(r.Result)) {
		return false
	}
	buf.WriteString(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":`)
	appendJSONString(buf, string(r.UID))
	if r.Allowed {
		buf.WriteString(`,"allowed":true`)
	} else {
		buf.WriteString(`,"allowed":false`)
	}
	if st := r.Result; st != nil {
		buf.WriteString(`,"status":{"metadata":{}`)
		if st.Status != "" {
			buf.WriteString(`,"status":`)
			appendJSONString(buf, st.Status)
		}
		if st.Message != "" {
			buf.WriteString(`,"message":`)
			appendJSONString(buf, st.Message)
		}
		buf.WriteByte('}')
	}
	if len(r.Patch) > 0 {
		// []byte is base64 in JSON; encoding/json's own encoding of it.
		b, err := json.Marshal(r.Patch)
		if err != nil {
			return false
		}
		buf.WriteString(`,"patch":`)
		buf.Write(b)
	}
	if r.PatchType != nil {
		buf.WriteString(`,"patchType":`)
		appendJSONString(buf, string(*r.PatchType))
	}
	if len(r.Warnings) > 0 {
		buf.WriteString(`,"warnings":[`)
		for i, w := range r.Warnings {
			if i > 0 {
				buf.WriteByte(',')
			}
			appendJSONString(buf, w)
		}
		buf.WriteByte(']')
	}
	buf.WriteString("}}\n")
	return true
}

// plainStatus reports whether a Status carries only status and message.
func plainStatus(st *metav1.Status) bool {
	return st.Kind == "" && st.APIVersion == "" && st.ListMeta == (metav1.ListMeta{}) &&
		st.Reason == "" && st.Details == nil && st.Code == 0
}

// appendJSONString writes s as a JSON string exactly as encoding/json
// does (with its HTML escaping of <, > and &, \ufffd for invalid UTF-8,
// and U+2028 and U+2029 escaped), straight into buf: a denial's message
// has line breaks, and going through json.Marshal for it made a copy per
// review.
func appendJSONString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			buf.WriteString(s[start:i])
			switch b {
			case '\\', '"':
				buf.WriteByte('\\')
				buf.WriteByte(b)
			case '\b':
				buf.WriteString(`\b`)
			case '\f':
				buf.WriteString(`\f`)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			default:
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[b>>4])
				buf.WriteByte(hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			buf.WriteString(s[start:i])
			buf.WriteString(`\ufffd`)
		case c == '\u2028' || c == '\u2029':
			buf.WriteString(s[start:i])
			buf.WriteString(`\u202`)
			buf.WriteByte(hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

const hexDigits = "0123456789abcdef"
