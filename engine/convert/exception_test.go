package convert

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// TestConvertException: an exception of a rule that converted to a policy
// of its own names that policy and carries its match as a matchCondition;
// an exception of one rule of a policy that holds others does not convert
// (it would exempt them all), and says so.
func TestConvertException(t *testing.T) {
	results := map[string]*Result{}
	for _, c := range []string{"anchors", "foreach-pattern"} {
		r := Convert(readPolicy(t, filepath.Join("testdata", c, "policy.yaml")))
		results[r.Key()] = r
	}
	docs, err := manifest.ReadFile(filepath.Join("testdata", "exceptions", "exceptions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pf, err := manifest.DecodePolicies(docs)
	if err != nil || len(pf.Exceptions) != 2 {
		t.Fatalf("want two exceptions, got %v (%v)", pf, err)
	}
	hostSettings := ConvertException(pf.Exceptions[0], results)
	if !hostSettings.Clean() {
		t.Fatalf("problems: %v", hostSettings.Problems)
	}
	got, err := hostSettings.YAML()
	if err != nil {
		t.Fatal(err)
	}
	compareFile(t, filepath.Join("testdata", "exceptions", "want.yaml"), string(got))

	partial := ConvertException(pf.Exceptions[1], results)
	if partial.Clean() || len(partial.Outputs) != 0 {
		t.Fatalf("an exception of one of two merged rules converted: %+v", partial.Outputs)
	}
	if msg := partial.Problems[0].String(); !strings.Contains(msg, "no-latest") || !strings.Contains(msg, "require-tag") {
		t.Errorf("problem does not name the exempted and the other rule: %s", msg)
	}
}
