package convert

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/internal/clitest/manifest"
)

var update = flag.Bool("update", false, "rewrite the want files of testdata/")

// TestConvert converts each testdata/<case>/policy.yaml and compares the
// result with want.yaml, and the problems with problems.txt (absent when
// the policy converts cleanly). The result decodes strictly as the
// policies.kyverno.io kinds it names, as kubectl apply reads them.
func TestConvert(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*/policy.yaml")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no testdata cases: %v", err)
	}
	for _, policyFile := range dirs {
		dir := filepath.Dir(policyFile)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			p := readPolicy(t, policyFile)
			res := Convert(p)
			got, err := res.YAML()
			if err != nil {
				t.Fatal(err)
			}
			var problems []string
			for _, pr := range res.Problems {
				problems = append(problems, pr.String())
			}
			docs, err := manifest.Split(got, "converted "+dir)
			if err == nil {
				_, err = manifest.DecodePolicies(docs)
			}
			if err != nil {
				t.Errorf("the converted policies do not decode: %v", err)
			}
			compareFile(t, filepath.Join(dir, "want.yaml"), string(got))
			compareFile(t, filepath.Join(dir, "problems.txt"), strings.Join(problems, "\n"))
		})
	}
}

func readPolicy(t *testing.T, path string) kyvernov1.PolicyInterface {
	t.Helper()
	docs, err := manifest.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := manifest.DecodePolicies(docs)
	if err != nil {
		t.Fatal(err)
	}
	if len(pf.Policies) != 1 {
		t.Fatalf("%s: want one policy, found %d", path, len(pf.Policies))
	}
	return pf.Policies[0]
}

// compareFile compares got with the file's content; an absent file
// stands for "". With -update it writes the file instead.
func compareFile(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if got == "" {
			_ = os.Remove(path)
			return
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s differs:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
