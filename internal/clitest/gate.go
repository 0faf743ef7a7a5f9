package clitest

import (
	"context"
	"fmt"

	"github.com/charter-dev/charter/engine/loader"
)

// RepositoryTests runs a repository's kyverno-test.yaml suites for the
// GitOps test gate (PolicyRepository spec.test): it satisfies
// reconciler/gitsync's TestRunner.
type RepositoryTests struct {
	// ImageVerifier verifies the images of verifyImages rules; without
	// one such rows end in error and fail the gate.
	ImageVerifier loader.ImageVerifier
}

// RunTests runs every suite under dir, reading nothing outside root, and
// returns one line per failing row, broken suite or suite that checked
// nothing. A folder without suites, or a run that checked no row, is an
// error: a gate that tests nothing must not pass.
func (g RepositoryTests) RunTests(ctx context.Context, root, dir string) ([]string, error) {
	results, err := NewRunner(Options{Root: root, ImageVerifier: g.ImageVerifier}).Run(ctx, []string{dir})
	if err != nil {
		return nil, err
	}
	var failures []string
	for _, r := range results {
		name := r.Suite.Name()
		switch {
		case r.Err != nil:
			failures = append(failures, fmt.Sprintf("%s: could not run: %v", name, r.Err))
			continue
		case r.CheckedNothing != "":
			failures = append(failures, fmt.Sprintf("%s: checked nothing: %s", name, r.CheckedNothing))
		}
		for _, row := range r.Rows {
			if row.Verdict == Failed {
				failures = append(failures, fmt.Sprintf("%s #%d %s/%s %s: %s", name, row.ID, row.Policy, row.Rule, row.Resource, row.Reason))
			}
		}
	}
	if t := TallyResults(results); len(failures) == 0 && t.Passed == 0 {
		return nil, fmt.Errorf("no expected result was checked under %s", dir)
	}
	return failures, nil
}
