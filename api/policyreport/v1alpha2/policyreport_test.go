package v1alpha2

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSummarize(t *testing.T) {
	results := []PolicyReportResult{
		{Result: StatusPass}, {Result: StatusPass}, {Result: StatusFail},
		{Result: StatusWarn}, {Result: StatusError}, {Result: StatusSkip}, {Result: "bogus"},
	}
	want := PolicyReportSummary{Pass: 2, Fail: 1, Warn: 1, Error: 1, Skip: 1}
	if got := Summarize(results); got != want {
		t.Errorf("Summarize() = %+v, want %+v", got, want)
	}
}

// TestWireFormat pins the JSON field names of the wgpolicyk8s.io/v1alpha2
// schema that Policy Reporter and other tools read.
func TestWireFormat(t *testing.T) {
	report := PolicyReport{
		TypeMeta:   metav1.TypeMeta{APIVersion: "wgpolicyk8s.io/v1alpha2", Kind: "PolicyReport"},
		ObjectMeta: metav1.ObjectMeta{Name: "uid-1", Namespace: "ns"},
		Scope:      &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", Namespace: "ns", UID: "uid-1"},
		Summary:    PolicyReportSummary{Fail: 1},
		Results: []PolicyReportResult{{
			Source: "kyverno", Policy: "require-labels", Rule: "check-team", Category: "Best Practices",
			Severity: SeverityMedium, Timestamp: metav1.Timestamp{Seconds: 1700000000, Nanos: 5},
			Result: StatusFail, Scored: true, Message: "label team is required",
			Resources:  []corev1.ObjectReference{{Kind: "Pod", Name: "web"}},
			Properties: map[string]string{"process": "background scan"},
		}},
	}
	data, err := json.Marshal(report)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2",
		"kind":       "PolicyReport",
		"metadata":   map[string]any{"name": "uid-1", "namespace": "ns"},
		"scope":      map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": "ns", "uid": "uid-1"},
		"summary":    map[string]any{"pass": 0.0, "fail": 1.0, "warn": 0.0, "error": 0.0, "skip": 0.0},
		"results": []any{map[string]any{
			"source": "kyverno", "policy": "require-labels", "rule": "check-team", "category": "Best Practices",
			"severity": "medium", "timestamp": map[string]any{"seconds": 1700000000.0, "nanos": 5.0},
			"result": "fail", "scored": true, "message": "label team is required",
			"resources":  []any{map[string]any{"kind": "Pod", "name": "web"}},
			"properties": map[string]any{"process": "background scan"},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("encoded report:\n got %s\nwant %s", data, mustJSON(want))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
