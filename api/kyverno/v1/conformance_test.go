package v1_test

import (
	"os"
	"testing"

	"github.com/charter-dev/charter/api/internal/roundtrip"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestConformanceRoundTrip decodes every kyverno.io/v1 ClusterPolicy and
// Policy of the shared conformance corpus strictly and checks that encoding
// it again loses nothing (see package roundtrip for the precise rule).
func TestConformanceRoundTrip(t *testing.T) {
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
	var checked, freeForm, dropped, added int
	for _, doc := range docs {
		if doc.APIVersion != "kyverno.io/v1" {
			continue
		}
		var obj kyvernov1.PolicyInterface
		switch doc.Kind {
		case kyvernov1.ClusterPolicyKind:
			obj = &kyvernov1.ClusterPolicy{}
		case kyvernov1.PolicyKind:
			obj = &kyvernov1.Policy{}
		default:
			continue
		}
		checked++
		res, err := roundtrip.Check(doc.YAML, obj)
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		freeForm += res.FreeForm
		dropped += len(res.Dropped)
		added += len(res.Added)
		for _, p := range res.Dropped {
			t.Logf("%s: zero value %s not re-encoded", doc, p)
		}
	}
	t.Logf("checked %d kyverno.io/v1 policies: %d free-form values kept exactly, %d zero values dropped, %d zero values added",
		checked, freeForm, dropped, added)
	// The corpus holds several hundred policies; finding none means the
	// walk or the kind filter is broken, not that all is well.
	if checked < 100 {
		t.Fatalf("checked only %d policies under %s", checked, dir)
	}
}
