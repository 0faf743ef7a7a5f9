// Package enginetest builds the PolicySets that tests of the engine's
// callers (controllers, webhook) evaluate, so that no test package keeps a
// compile loop of its own: the controllers themselves never compile, they
// read the sets of the policy cache's snapshot.
package enginetest

import (
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
)

// Set compiles policies of any kind into one PolicySet, as
// engine.Compile does, and fails the test when one of them has a fault.
func Set(t testing.TB, policies ...kyvernov1.PolicyInterface) *engine.PolicySet {
	t.Helper()
	set, err := engine.Compile(policies)
	if err != nil {
		t.Fatalf("compiling %d policies: %v", len(policies), err)
	}
	return set
}
