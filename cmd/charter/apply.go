package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/charter-dev/charter/internal/cliapply"
	"github.com/charter-dev/charter/internal/printer"
)

func newApplyCommand() *cobra.Command {
	var (
		opts         cliapply.Options
		output       string
		policyReport bool
		failOnly     bool
		printObjects bool
	)
	cmd := &cobra.Command{
		Use:   "apply POLICY... --resource FILE|DIR|-",
		Short: "Evaluate policies against resource manifests",
		Long: `Evaluate ClusterPolicies and Policies against resource manifests, as
admission would for a CREATE: mutate rules first, then validate rules on the
mutated resource, then generate rules. Print a verdict per resource and rule;
--print-resources adds the mutated resources and the generated objects.

POLICY and --resource name files or directories (searched recursively for
.yaml, .yml and .json); --resource - reads resources from stdin. The command
exits 1 when a rule whose failure action is Enforce fails, i.e. when
admission would deny a resource.`,
		Example: `  charter apply policies/ --resource manifests/
  charter apply policies/mutate policies/generate --resource ns-and-pods.yaml --print-resources
  kustomize build overlays/prod | charter apply policies/ --resource - --fail-only
  charter apply policies/pod-security --resource pods.yaml --policy-report`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := printer.CheckFormat(output); err != nil {
				return err
			}
			tuneGCForBatch()
			opts.PolicyPaths = args
			opts.Stdin = cmd.InOrStdin()
			outcome, err := cliapply.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			for _, w := range outcome.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", w)
			}
			out := cmd.OutOrStdout()
			switch {
			case policyReport:
				err = cliapply.WriteReports(out, output, cliapply.PolicyReports(outcome, time.Now()))
			case output != "":
				err = printer.WriteObject(out, output, cliapply.Records(outcome, failOnly))
			default:
				err = cliapply.WriteTable(out, outcome, printer.ColorEnabled(out), failOnly)
			}
			if err != nil {
				return err
			}
			if printObjects {
				if err := cliapply.WriteResources(out, outcome); err != nil {
					return err
				}
			}
			if output != "" || policyReport {
				fmt.Fprintln(cmd.ErrOrStderr(), outcome.SummaryLine())
			}
			if outcome.Blocked {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&opts.ResourcePaths, "resource", "r", nil, "resource file or directory, or - for stdin (repeatable)")
	f.BoolVar(&opts.AuditWarn, "audit-warn", false, "report failures of Audit rules as warn")
	f.BoolVar(&policyReport, "policy-report", false, "print PolicyReports and ClusterPolicyReports (YAML, or a List with -o json)")
	f.BoolVar(&failOnly, "fail-only", false, "show only fail, warn and error results")
	f.BoolVar(&printObjects, "print-resources", false, "after the results, print the mutated resources and the generated objects as YAML")
	f.StringVarP(&output, "output", "o", "", "output format: json|yaml")
	return cmd
}
