package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/charter-dev/charter/internal/cliapply"
	"github.com/charter-dev/charter/internal/printer"
)

// tuneGCForBatch trades memory for speed in charter apply: it allocates a
// lot while parsing YAML and exits soon after, so collecting less often
// saves about a fifth of its CPU time for some tens of MiB. An explicit
// GOGC wins. (charter test no longer does: see there.)
func tuneGCForBatch() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

func newApplyCommand() *cobra.Command {
	var (
		opts         cliapply.Options
		output       string
		policyReport bool
		failOnly     bool
		printObjects bool
		removeColor  bool
		cluster      clusterSource
		registry     string
	)
	cmd := &cobra.Command{
		Use:   "apply POLICY... --resource FILE|DIR|-",
		Short: "Evaluate policies against resource manifests",
		Long: `Evaluate ClusterPolicies and Policies against resource manifests, as
admission would for a CREATE: mutate rules first, then validate rules on the
mutated resource, then generate rules. Print a verdict per resource and rule;
--print-resources adds the mutated resources and the generated objects.
A rule that uses a feature charter does not run (validate.assert, the
CEL authorizer, ...; see docs/policies.md) is named in a warning on stderr: its
verdict is not the one Kyverno would give.

POLICY and --resource name files or directories (searched recursively for
.yaml, .yml and .json); --resource - reads resources from stdin. Files of a
POLICY folder that hold no policy (tests, values, resources kept beside the
policies) are skipped with one line on stderr. The command exits 1 when a
rule whose failure action is Enforce fails, i.e. when admission would deny
a resource.

As in Kyverno's CLI: --values-file pins variables and namespace labels (a
test's kind: Values file), --set pins variables over it, --userinfo names
the requesting user (kind: UserInfo), --exception adds PolicyExceptions.
--cluster reads the current kubeconfig's cluster: with no --resource, the
resources of the kinds the policies match (in --namespace, if given) are
evaluated; configMap and apiCall context entries, namespace labels, mutate
targets and clone sources are read from it too.`,
		Example: `  charter apply policies/ --resource manifests/
  charter apply policies/mutate policies/generate --resource ns-and-pods.yaml --print-resources
  kustomize build overlays/prod | charter apply policies/ --resource - --fail-only
  charter apply policies/pod-security --resource pods.yaml --policy-report
  charter apply policies/ --resource pod.yaml --values-file values.yaml --set team=payments --userinfo user.yaml
  charter apply policies/ --cluster --namespace shop --fail-only`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := printer.CheckFormat(output); err != nil {
				return err
			}
			tuneGCForBatch()
			opts.PolicyPaths = args
			opts.Stdin = cmd.InOrStdin()
			if cluster.enabled {
				if err := cluster.configure(cmd.Context(), &opts); err != nil {
					return err
				}
			}
			opts.Loaders.ImageVerifier = cliImageVerifier(registry)
			outcome, err := cliapply.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			for _, n := range outcome.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), n)
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
				err = cliapply.WriteTable(out, outcome, !removeColor && printer.ColorEnabled(out), failOnly)
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
	f.BoolVarP(&policyReport, "policy-report", "p", false, "print PolicyReports and ClusterPolicyReports (YAML, or a List with -o json)")
	f.StringVarP(&opts.ValuesFile, "values-file", "f", "", "values file (kind: Values) pinning variables and namespace labels")
	f.StringSliceVarP(&opts.Set, "set", "s", nil, "pin variables: key=value (repeatable, or comma-separated)")
	f.StringVarP(&opts.UserInfoFile, "userinfo", "u", "", "user info file (kind: UserInfo): the requesting user, roles and cluster roles")
	f.StringArrayVarP(&opts.ExceptionPaths, "exception", "e", nil, "PolicyException file or directory (repeatable)")
	f.BoolVarP(&cluster.enabled, "cluster", "c", false, "read resources (without --resource) and context data from the current kubeconfig's cluster")
	f.StringVarP(&cluster.namespace, "namespace", "n", "", "with --cluster: read resources from this namespace only")
	f.StringVar(&cluster.kubeconfig, "kubeconfig", "", "with --cluster: kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.BoolVar(&removeColor, "remove-color", false, "never colour the output (it is coloured only on a terminal anyway)")
	f.BoolVar(&failOnly, "fail-only", false, "show only fail, warn and error results")
	f.BoolVar(&printObjects, "print-resources", false, "after the results, print the mutated resources and the generated objects as YAML")
	f.StringVarP(&output, "output", "o", "", "output format: json|yaml")
	f.StringVar(&registry, "registry", "", registryFlagHelp)
	return cmd
}
