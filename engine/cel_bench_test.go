package engine

import (
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// podSecurityCELPolicies loads the CEL edition of the Pod Security library
// from the conformance corpus (baseline and restricted).
func podSecurityCELPolicies(b *testing.B) []kyvernov1.PolicyInterface {
	return podSecurityLibrary(b, "pod-security-cel")
}

// BenchmarkValidatePodCEL is BenchmarkValidatePod through the CEL edition
// of the library: every validate.cel rule evaluated per Pod.
func BenchmarkValidatePodCEL(b *testing.B) {
	benchValidatePods(b, podSecurityCELPolicies(b))
}

// BenchmarkCompileCEL compiles the CEL library again and again with one
// CompileCache; compiled rules are shared by source, so this is the cost
// of recompiling policies that did not change.
func BenchmarkCompileCEL(b *testing.B) { benchCompile(b, podSecurityCELPolicies(b)) }
