package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code without printing anything more: the
// command has already reported what went wrong (a failed test run, an
// Enforce violation found by apply).
type exitError struct{ code int }

func (e exitError) Error() string { return "" }

func exitCode(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func newRootCommand() *cobra.Command {
	var cpuProfile string
	root := &cobra.Command{
		Use:           "charter",
		Short:         "A Kubernetes policy engine that speaks Kyverno's policy language, driven from Git",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return startCPUProfile(cpuProfile)
		},
	}
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the command to this file")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	root.AddCommand(newVersionCommand())
	root.AddCommand(newServeCommand())
	root.AddCommand(newTestCommand())
	root.AddCommand(newApplyCommand())
	root.AddCommand(newDevCommand())
	root.AddCommand(newPushCommand())
	root.AddCommand(newConvertCommand())
	root.AddCommand(newReportsServerCommand())
	return root
}
