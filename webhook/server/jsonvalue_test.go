package server

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// jsonDocs are bodies on which the fast decoders must agree with
// encoding/json: valid JSON of every kind, the escapes and encodings it
// treats specially, and malformed JSON it refuses.
var jsonDocs = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e3`, `-12.25E-2`, `1e400`, `"s"`, `""`,
	` {"a" : [1, 2.5, "x", true, false, null, {}, []] , "b": {"c": {"d": "e"}}} `,
	`{"a":1,"a":2}`, `{"a":{"x":1},"a":{"y":2}}`,
	`"tab\tnewline\nquote\"slash\/back\\unicode\u00e9"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\udc00x"`,
	"\"caf\xc3\xa9\"", "\"bad\xff\xfeutf8\"", "\"ctl\x01\"", `"\x"`, `"\u12"`,
	`{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `tru`, `nul`, `"open`,
	`{"a":1} x`, `{"a":1}{}`, `[`, `{`, ``, ` `,
	// shared values (sharedValues) next to strings that only start or end
	// like one, escaped ones, and one left open
	`{"v1":"Pod","kind":["v1","Pod","TCP","","ALL","v1x","v","Po\"d","Pod\u0041","\u0050od","RuntimeDefault ","node.kubernetes.io/unreachable"]}`,
	`["Pod`, `"TCP"x`, `"default-scheduler"`,
}

func TestDecodeJSONValueMatchesEncodingJSON(t *testing.T) {
	for _, doc := range jsonDocs {
		checkJSONValue(t, []byte(doc))
	}
}

func checkJSONValue(t *testing.T, doc []byte) {
	t.Helper()
	got, ok := decodeJSONValue(doc)
	var want any
	err := json.Unmarshal(doc, &want)
	if !ok {
		return // left to encoding/json
	}
	if err != nil {
		t.Errorf("%q: decoded %#v, encoding/json refuses it: %v", doc, got, err)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%q: decoded\n%#v\nencoding/json\n%#v", doc, got, want)
	}
}

// The fast path takes what the API server sends.
func TestDecodeJSONValueTakes(t *testing.T) {
	for _, doc := range []string{
		`{"a":[1,2.5,"x",true,false,null,{},[]],"b":{"c":"d"}}`,
		`"tab\tnewline\nquote\"unicode\u00e9"`, "\"caf\xc3\xa9\"",
	} {
		if _, ok := decodeJSONValue([]byte(doc)); !ok {
			t.Errorf("%q left to encoding/json", doc)
		}
	}
}

// reviewBodies are AdmissionReviews on which decodeUnstructuredReview
// must agree with encoding/json, including shapes it leaves to it.
func reviewBodies(t testing.TB) [][]byte {
	seed, err := os.ReadFile("testdata/review-pod.json")
	if err != nil {
		t.Fatal(err)
	}
	bodies := [][]byte{seed, compliant().review()}
	for _, s := range []string{
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},` +
			`"resource":{"group":"apps","version":"v1","resource":"deployments"},"subResource":"scale",` +
			`"requestKind":{"group":"autoscaling","version":"v1","kind":"Scale"},"requestResource":{"group":"apps","version":"v1","resource":"deployments"},` +
			`"requestSubResource":"scale","name":"web","namespace":"default","operation":"UPDATE",` +
			`"userInfo":{"username":"alice","uid":"1","groups":["a",null],"extra":{"scopes":["x"],"none":null,"empty":[]}},` +
			`"object":{"kind":"Scale"},"oldObject":{},"dryRun":true,"options":{"kind":"UpdateOptions"}},"response":{"allowed":true}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"DELETE","oldObject":null,"object":null,"dryRun":null,"requestKind":null}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		// Shapes left to encoding/json.
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"UID":"u","kind":{"Kind":"Pod"},"operation":"CREATE"}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","Request":{"uid":"u"}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"kind":{"group":"g"}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":[]}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","dryRun":"yes"}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","userInfo":{"groups":"g"}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","userInfo":{"extra":{"k":[1]}}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uıd":"u"}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"x"}`,
		`[]`, `null`, `{"apiVersion":1}`,
	} {
		bodies = append(bodies, []byte(s))
	}
	return bodies
}

func TestDecodeUnstructuredReviewMatchesEncodingJSON(t *testing.T) {
	taken := 0
	for _, body := range reviewBodies(t) {
		if checkReview(t, body) {
			taken++
		}
	}
	if taken < 6 {
		t.Errorf("the fast path took %d reviews, want the 6 plain ones", taken)
	}
}

func checkReview(t *testing.T, body []byte) bool {
	t.Helper()
	var got unstructuredReview
	ok := decodeUnstructuredReview(body, &got)
	var want unstructuredReview
	err := json.Unmarshal(body, &want)
	if !ok {
		return false
	}
	if err != nil {
		t.Errorf("%s: decoded, encoding/json refuses it: %v", body, err)
		return true
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: decoded\n%#v\nencoding/json\n%#v", body, got.Request, want.Request)
	}
	return true
}

// FuzzDecodeReview: whatever the fast decoders take, they decode as
// encoding/json does.
func FuzzDecodeReview(f *testing.F) {
	for _, b := range reviewBodies(f) {
		f.Add(b)
	}
	for _, d := range jsonDocs {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkJSONValue(t, body)
		checkReview(t, body)
	})
}

// BenchmarkDecodeReview compares the resource handlers' decoding of a Pod
// review with encoding/json's.
func BenchmarkDecodeReview(b *testing.B) {
	body := compliant().review()
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r unstructuredReview
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r unstructuredReview
			if !decodeUnstructuredReview(body, &r) {
				b.Fatal("left to encoding/json")
			}
		}
	})
}
