package clitest

import (
	"fmt"
	"slices"

	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// UntestedPolicies lists the policies found under paths that no expected
// result of the run names, as "name (file)", for `charter test
// --require-tests`. Policies are read from the .yaml, .yml and .json files
// under the paths (test folders such as .kyverno-test are not searched);
// files that hold no policy, or are no manifests at all, are passed over.
func UntestedPolicies(paths []string, results []*SuiteResult) ([]string, error) {
	tested := map[string]bool{}
	for _, r := range results {
		if r.Suite.Test == nil {
			continue
		}
		for i := range r.Suite.Test.Results {
			tested[r.Suite.Test.Results[i].PolicyName()] = true
		}
	}
	files, err := manifest.Files(paths)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		docs, err := manifest.ReadFile(f)
		if err != nil {
			continue // not a manifest: not a policy either
		}
		ps, err := manifest.DecodePolicies(docs)
		if err != nil {
			continue
		}
		var names []string
		for _, p := range ps.Policies {
			names = append(names, p.GetName())
		}
		for name := range ps.Unsupported {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if !tested[name] {
				out = append(out, fmt.Sprintf("%s (%s)", name, f))
			}
		}
	}
	return out, nil
}
