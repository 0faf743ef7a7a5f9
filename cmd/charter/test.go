package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/charter-dev/charter/internal/clitest"
	"github.com/charter-dev/charter/internal/printer"
)

func newTestCommand() *cobra.Command {
	var (
		fileName     string
		report       clitest.ReportOptions
		selector     string
		requireTests bool
		removeColor  bool
		registry     string
		insecure     bool
	)
	cmd := &cobra.Command{
		Use:   "test PATH|oci://REGISTRY/REPOSITORY[:TAG]...",
		Short: "Run Kyverno CLI test suites (kyverno-test.yaml) against charter's engine",
		Long: `Run Kyverno CLI test suites.

Every directory given is searched recursively (dot-directories such as
.kyverno-test included) for files named --file-name; a file given directly is
read as is. Each Test document names policies, resources and the expected
results; charter evaluates them and compares every expected result the way
"kyverno test" does, with one difference: a run cannot pass while testing
nothing. An expected result of a policy that is invalid, or of a kind or
feature charter does not evaluate, fails with the reason in the table
(Kyverno's CLI skips such policies and counts them as passed); an error
result fails with its message; a suite none of whose expected results met a
rule response says "checked nothing" and fails. The last line is
"Summary: N passed, M failed" and the command exits 1 when anything failed,
a suite checked nothing, nothing was checked at all, or a test file could
not be run.

For CI: -o junit writes JUnit XML (one testsuite per test document, one
testcase per expected result) for the CI system's test report, with the
summary on stderr; --require-tests also fails the run when a policy found
under the paths is named by no expected result; -t narrows the run to some
expected results, with Kyverno's syntax "policy=NAME,rule=NAME,resource=NAME"
(wildcards * and ?; a key left out matches all; a result is narrowed to the
resources that match, and a suite left with none is not run).

An oci:// argument is an artifact in Flux's format (charter push, flux push
artifact): its tag (latest when none) is resolved to a digest, that digest
is pulled into a temporary folder, and the folder is tested, so CI tests
exactly the artifact a PolicyRepository would apply.`,
		Example: `  charter test policies/
  charter test --fail-only --detailed-results policies/pod-security
  charter test -o json policies/ > results.json
  charter test --require-tests --remove-color -o junit policies/ > junit.xml
  charter test policies/ -t "policy=disallow-latest-tag,rule=require-image-tag,resource=*-pass"
  charter test oci://ghcr.io/example/policies:v1.2.0`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			if report.Output != "junit" {
				if err := printer.CheckFormat(report.Output); err != nil {
					return fmt.Errorf("%w, or junit", err)
				}
			}
			sel, err := clitest.ParseCaseSelector(selector)
			if err != nil {
				return err
			}
			// No tuneGCForBatch: a run holds only the suites in flight, a
			// few MiB, so the default GOGC costs about a tenth more CPU
			// (validate.txt 0.17 -> 0.19 s) where GOGC=400 more than
			// doubled the peak heap (validate.txt 24 -> 54 MiB anon):
			// issue 19's 80 MB for the CLI in CI. $GOGC still applies.
			paths, cleanup, err := pullArtifacts(cmd.Context(), paths, insecure)
			if err != nil {
				return err
			}
			defer cleanup()
			runner := clitest.NewRunner(clitest.Options{FileName: fileName, Selector: sel, ImageVerifier: cliImageVerifier(registry)})
			results, err := runner.Run(cmd.Context(), paths)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			report.Color = !removeColor && printer.ColorEnabled(out)
			tally, err := clitest.Report(out, cmd.ErrOrStderr(), results, report)
			if err != nil {
				return err
			}
			failed := tally.AnyFailure()
			if requireTests {
				untested, err := clitest.UntestedPolicies(paths, results)
				if err != nil {
					return err
				}
				for _, p := range untested {
					fmt.Fprintf(cmd.ErrOrStderr(), "Error: policy %s has no test (--require-tests)\n", p)
				}
				failed = failed || len(untested) > 0
			}
			if failed {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&fileName, "file-name", "f", clitest.DefaultFileName, "name of the test files to look for in directories")
	f.BoolVar(&report.FailOnly, "fail-only", false, "show only failing results")
	f.BoolVar(&report.Detailed, "detailed-results", false, "add each rule's message to the results")
	f.StringVarP(&report.Output, "output", "o", "", "output format: json|yaml (one record per expected result) or junit (JUnit XML)")
	f.StringVarP(&selector, "test-case-selector", "t", clitest.DefaultCaseSelector, `run only these expected results: "policy=NAME,rule=NAME,resource=NAME", wildcards allowed`)
	f.BoolVar(&requireTests, "require-tests", false, "fail when a policy found under the paths has no expected result in any test")
	f.BoolVar(&removeColor, "remove-color", false, "never colour the output (it is coloured only on a terminal anyway)")
	f.StringVar(&registry, "registry", "", registryFlagHelp)
	f.BoolVar(&insecure, "insecure", false, "read oci:// arguments over plain HTTP (a loopback registry only)")
	return cmd
}
