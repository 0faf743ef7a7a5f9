package engine

import (
	"os"
	"path/filepath"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// podSecurityCELPolicies loads the CEL edition of the Pod Security library
// from the conformance corpus (baseline and restricted).
func podSecurityCELPolicies(b *testing.B) []kyvernov1.PolicyInterface {
	root := filepath.Join(conformanceDir, "kyverno-policies", "pod-security-cel")
	var out []kyvernov1.PolicyInterface
	for _, level := range []string{"baseline", "restricted"} {
		dirs, err := os.ReadDir(filepath.Join(root, level))
		if err != nil {
			b.Skipf("conformance corpus not available: %v", err)
		}
		for _, d := range dirs {
			if d.IsDir() {
				out = append(out, loadSuitePolicies(b, "/", []string{filepath.Join(root, level, d.Name(), d.Name()+".yaml")})...)
			}
		}
	}
	return out
}

// BenchmarkValidatePodCEL is BenchmarkValidatePod through the CEL edition
// of the library: every validate.cel rule evaluated per Pod.
func BenchmarkValidatePodCEL(b *testing.B) {
	benchValidatePods(b, podSecurityCELPolicies(b))
}

// BenchmarkCompileCEL compiles the CEL library again and again; compiled
// rules are shared by source, so this is the cost of recompiling policies
// that did not change.
func BenchmarkCompileCEL(b *testing.B) {
	policies := podSecurityCELPolicies(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(policies); err != nil {
			b.Fatal(err)
		}
	}
}
