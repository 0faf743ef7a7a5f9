package v2_test

import (
	"os"
	"testing"

	"github.com/charter-dev/charter/api/internal/roundtrip"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// TestConformancePolicyExceptions round-trips every PolicyException of the
// conformance corpus. The corpus writes them as kyverno.io/v2beta1, whose
// wire format is the same as v2's, so both are decoded into the v2 type.
func TestConformancePolicyExceptions(t *testing.T) {
	dir, err := roundtrip.ConformanceDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("conformance corpus not found at %s", dir)
	}
	docs, err := roundtrip.ReadDocuments(dir)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, doc := range docs {
		if doc.Kind != kyvernov2.PolicyExceptionKind || (doc.APIVersion != "kyverno.io/v2" && doc.APIVersion != "kyverno.io/v2beta1") {
			continue
		}
		checked++
		if _, err := roundtrip.Check(doc.YAML, &kyvernov2.PolicyException{}); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	t.Logf("checked %d PolicyExceptions", checked)
	if checked == 0 {
		t.Fatalf("no PolicyException found under %s", dir)
	}
}
