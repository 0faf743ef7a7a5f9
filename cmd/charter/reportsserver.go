package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/charter-dev/charter/internal/reportsserver"
)

func newReportsServerCommand() *cobra.Command {
	opts := reportsserver.NewOptions()
	cmd := &cobra.Command{
		Use:   "reports-server",
		Short: "Serve the report APIs (wgpolicyk8s.io, openreports.io) from PostgreSQL as an aggregated API server",
		Long: `reports-server serves PolicyReport, ClusterPolicyReport (wgpolicyk8s.io/v1alpha2),
Report and ClusterReport (openreports.io/v1alpha1) from PostgreSQL, for
kube-apiserver to route those APIs to by APIServices, so that reports leave
etcd while kubectl, charter's controllers and report readers use the same API.
The report CRDs must then not be installed. Authentication and authorisation
are delegated to kube-apiserver (--kubeconfig, or in-cluster).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv, err := opts.New(ctx)
			if err != nil {
				return err
			}
			return srv.Run(ctx)
		},
	}
	opts.AddFlags(cmd.Flags())
	return cmd
}
