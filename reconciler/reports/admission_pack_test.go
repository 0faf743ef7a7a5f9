package reports

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// TestPackedResultsRoundTrip: every field of a result comes back as it
// was packed, and the packings of two admissions one after the other
// unpack to the results of both, in order.
func TestPackedResultsRoundTrip(t *testing.T) {
	full := v1alpha2.PolicyReportResult{
		Source: "kyverno", Policy: "ns/require-labels", Rule: "check-team", Category: "Best Practices",
		Severity: v1alpha2.SeverityHigh, Timestamp: metav1.Timestamp{Seconds: 1764750000, Nanos: 123456789},
		Result: v1alpha2.StatusFail, Scored: true,
		Resources: []corev1.ObjectReference{{Kind: "Pod", Namespace: "ns", Name: "web", UID: "uid-1", APIVersion: "v1", ResourceVersion: "42", FieldPath: "spec.containers[0]"}},
		ResourceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}},
		Message:    "validation error: label team is required. rule check-team failed at path /metadata/labels/team/",
		Properties: map[string]string{"process": "admission review", "exceptions": "a,b", "empty": ""},
	}
	bare := v1alpha2.PolicyReportResult{Policy: "p", Timestamp: metav1.Timestamp{Seconds: -5}}
	first := []v1alpha2.PolicyReportResult{full, bare}
	second := []v1alpha2.PolicyReportResult{{Source: "ValidatingPolicy", Policy: "q", Rule: "q", Result: v1alpha2.StatusPass}}

	packed := packResults(nil, first)
	packed = packResults(packed, second)
	got, err := packed.unpack()
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Concat(first, second); !reflect.DeepEqual(got, want) {
		t.Errorf("unpacked\n%#v\nwant\n%#v", got, want)
	}
	if got, err := packedResults(nil).unpack(); err != nil || len(got) != 0 {
		t.Errorf("nothing packed: %v, %v", got, err)
	}
}

// TestPackedResultsMalformed: a packing cut short is an error, never a
// result made up of what was left.
func TestPackedResultsMalformed(t *testing.T) {
	packed := packResults(nil, []v1alpha2.PolicyReportResult{{Policy: "p", Rule: "r", Message: "m", Properties: map[string]string{"k": "v"}}})
	for n := 1; n < len(packed); n++ {
		if got, err := packed[:n].unpack(); err == nil {
			t.Fatalf("the first %d of %d bytes unpacked to %#v", n, len(packed), got)
		}
	}
}

// TestPackedResultsKnowEveryField: the packing names every field of a
// report result; a field added to the API type must be packed too (this
// test then names it).
func TestPackedResultsKnowEveryField(t *testing.T) {
	packedFields := map[reflect.Type][]string{
		reflect.TypeFor[v1alpha2.PolicyReportResult](): {"Source", "Policy", "Rule", "Category", "Severity", "Timestamp", "Result", "Scored", "Resources", "ResourceSelector", "Message", "Properties"},
		reflect.TypeFor[metav1.Timestamp]():            {"Seconds", "Nanos"},
		reflect.TypeFor[corev1.ObjectReference]():      {"Kind", "Namespace", "Name", "UID", "APIVersion", "ResourceVersion", "FieldPath"},
	}
	for typ, packed := range packedFields {
		for i := range typ.NumField() {
			if name := typ.Field(i).Name; !slices.Contains(packed, name) {
				t.Errorf("%s.%s is not packed (admission_pack.go)", typ, name)
			}
		}
	}
}
