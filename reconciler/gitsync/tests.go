package gitsync

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// TestRunner runs the kyverno-test.yaml suites found under dir, a folder of
// the checkout root, reading no file outside root. It returns each failing
// row (or broken suite) as a line naming the suite, policy, rule, resource
// and reason; err is set when the suites could not be run at all (none
// found included). cmd/charter gives it charter test's runner.
type TestRunner interface {
	RunTests(ctx context.Context, root, dir string) (failures []string, err error)
}

// maxFailuresShown bounds the failing rows a Ready message names; the
// count says how many more there are.
const maxFailuresShown = 10

// testRevision runs the revision's suites under path (spec.test). Without
// a runner the revision fails: a repository that asks for its tests is
// never applied untested.
func (r *PolicyRepositoryReconciler) testRevision(ctx context.Context, dir, path string) error {
	if r.Tests == nil {
		return errors.New("spec.test is set, but this charter runs no test suites")
	}
	failures, err := r.Tests.RunTests(ctx, dir, filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		return fmt.Errorf("tests under %q could not run: %w", path, err)
	}
	if len(failures) == 0 {
		return nil
	}
	shown := failures[:min(len(failures), maxFailuresShown)]
	msg := fmt.Sprintf("%d test row(s) under %q failed: %s", len(failures), path, strings.Join(shown, "; "))
	if more := len(failures) - len(shown); more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return errors.New(msg)
}
