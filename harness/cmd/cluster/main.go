// Command cluster creates, deletes or runs the clusters charter's tests use:
//
//	go run ./harness/cmd/cluster create --provider kind --name charter   # make kind-create
//	go run ./harness/cmd/cluster delete --provider kind --name charter   # make kind-delete
//	go run ./harness/cmd/cluster start  --provider local                 # until Ctrl-C
//
// A local control plane lives as long as the process that started it, so it
// has only `start`; a kind cluster outlives `create` until `delete`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/charter-dev/charter/harness/cluster"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

type flags struct {
	provider   string
	name       string
	kindConfig string
	nodeImage  string
	kubeconfig string
	crds       []string
}

func (f *flags) options() []cluster.Option {
	opts := []cluster.Option{cluster.WithName(f.name)}
	if f.kindConfig != "" {
		opts = append(opts, cluster.WithKindConfig(f.kindConfig))
	}
	if f.nodeImage != "" {
		opts = append(opts, cluster.WithKindNodeImage(f.nodeImage))
	}
	return opts
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "cluster",
		Short:         "Create, delete or run the clusters charter's tests use (kind or local)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newCreateCommand(), newDeleteCommand(), newStartCommand())
	return root
}

func addCommonFlags(cmd *cobra.Command, f *flags, defaultProvider string) {
	cmd.Flags().StringVar(&f.provider, "provider", defaultProvider, "cluster provider: kind or local")
	cmd.Flags().StringVar(&f.name, "name", cluster.DefaultName, "kind cluster name")
}

func newCreateCommand() *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a kind cluster (or adopt an existing one) and add it to your kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.provider != cluster.KindProvider {
				return fmt.Errorf("create works with --provider kind only: a %s control plane lives as long as its process, use `start --provider %s`", f.provider, f.provider)
			}
			p, err := cluster.New(cluster.KindProvider, append(f.options(), cluster.WithKeepCluster(true))...)
			if err != nil {
				return err
			}
			kind := p.(*cluster.Kind)
			if err := kind.Start(cmd.Context()); err != nil {
				_ = kind.Stop(context.Background())
				return err
			}
			defer kind.Stop(context.Background()) //nolint:errcheck // only removes the private kubeconfig: the cluster is kept
			if err := kind.ExportKubeconfig(f.kubeconfig); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kind cluster %q is ready; kubectl context kind-%s\n", kind.ClusterName(), kind.ClusterName())
			return nil
		},
	}
	addCommonFlags(cmd, f, cluster.KindProvider)
	cmd.Flags().StringVar(&f.kindConfig, "config", "", "kind cluster configuration file (default: one control-plane node)")
	cmd.Flags().StringVar(&f.nodeImage, "image", "", "kindest/node image (default: kind's)")
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file to add the cluster to (default: $KUBECONFIG or ~/.kube/config)")
	return cmd
}

func newDeleteCommand() *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a kind cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.provider != cluster.KindProvider {
				return fmt.Errorf("delete works with --provider kind only: a %s control plane stops with its `start` process", f.provider)
			}
			p, err := cluster.New(cluster.KindProvider, f.options()...)
			if err != nil {
				return err
			}
			if err := p.(*cluster.Kind).Delete(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kind cluster %q deleted\n", f.name)
			return nil
		},
	}
	addCommonFlags(cmd, f, cluster.KindProvider)
	return cmd
}

func newStartCommand() *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start a cluster, print its kubeconfig path and run until interrupted, then tear it down",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			p, err := cluster.New(f.provider, f.options()...)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "starting a %s cluster...\n", p.Name())
			started := time.Now()
			err = p.Start(ctx)
			defer func() {
				if stopErr := p.Stop(context.Background()); stopErr != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "Error stopping the cluster:", stopErr)
				}
			}()
			if err != nil {
				return err
			}
			if len(f.crds) > 0 {
				if err := cluster.InstallCRDs(ctx, p, f.crds...); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "%s cluster ready in %s\n\n  export KUBECONFIG=%s\n\nCtrl-C stops it.\n",
				p.Name(), time.Since(started).Round(100*time.Millisecond), p.KubeconfigPath())
			<-ctx.Done()
			fmt.Fprintln(out, "stopping...")
			return nil
		},
	}
	addCommonFlags(cmd, f, cluster.LocalProvider)
	cmd.Flags().StringVar(&f.kindConfig, "config", "", "kind cluster configuration file")
	cmd.Flags().StringSliceVar(&f.crds, "crds", nil, "CRD files or folders to install once the cluster is up")
	return cmd
}
