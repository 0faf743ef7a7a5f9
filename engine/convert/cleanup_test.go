package convert

import (
	"path/filepath"
	"testing"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// TestConvertCleanup: a ClusterCleanupPolicy becomes a DeletingPolicy
// with its match as matchConstraints, its exclude and conditions (target
// read as object) as conditions, and its schedule; the result compiles as
// charter's cleanup controller compiles it.
func TestConvertCleanup(t *testing.T) {
	docs, err := manifest.ReadFile(filepath.Join("testdata", "cleanup", "cleanup.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &kyvernov2.ClusterCleanupPolicy{}
	if err := manifest.DecodeDocument(docs[0], p); err != nil {
		t.Fatal(err)
	}
	res := ConvertCleanup(p)
	if !res.Clean() {
		t.Fatalf("problems: %v", res.Problems)
	}
	got, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	compareFile(t, filepath.Join("testdata", "cleanup", "want.yaml"), string(got))
}
