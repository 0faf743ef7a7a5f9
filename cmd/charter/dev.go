package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/printer"
)

// defaultCRDDir is where `make manifests` writes charter's CRDs.
const defaultCRDDir = "config/crd/bases"

type devOptions struct {
	kubeconfig string
	crds       []string
	binDir     string
	keepLogs   bool
}

func newDevCommand() *cobra.Command {
	opts := devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run charter against a local control plane (etcd + kube-apiserver), until Ctrl-C",
		Long: `dev starts a real etcd and kube-apiserver on this machine (built by
'make controlplane'; no Docker needed), installs charter's CRDs and prints how
to point kubectl at it. With --kubeconfig it uses that cluster instead and
leaves it running on exit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if !cmd.Flags().Changed("crds") {
				opts.crds = []string{resolveDefaultCRDDir()}
			}
			return runDev(ctx, cmd.OutOrStdout(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.kubeconfig, "kubeconfig", "", "use this cluster instead of starting a local control plane")
	cmd.Flags().StringSliceVar(&opts.crds, "crds", []string{defaultCRDDir}, "CRD files or folders to install")
	cmd.Flags().StringVar(&opts.binDir, "bin-dir", "", "folder holding etcd and kube-apiserver (default $KUBEBUILDER_ASSETS, else <repo>/bin)")
	cmd.Flags().BoolVar(&opts.keepLogs, "keep-logs", false, "keep the control plane's work folder (logs, etcd data) on exit")
	return cmd
}

// resolveDefaultCRDDir finds config/crd/bases from the working directory,
// else from the repository root, so `charter dev` works from any folder of
// a checkout.
func resolveDefaultCRDDir() string {
	if _, err := os.Stat(defaultCRDDir); err == nil {
		return defaultCRDDir
	}
	if root, err := controlplane.ModuleRoot(); err == nil {
		return filepath.Join(root, defaultCRDDir)
	}
	return defaultCRDDir
}

func runDev(ctx context.Context, out io.Writer, opts devOptions) error {
	// envtest and, later, the controllers log through controller-runtime;
	// dev's own output is the lines below, so their chatter is dropped
	// unless a component sets a real logger.
	ctrllog.SetLogger(logr.Discard())

	env := &devEnvironment{out: out, color: printer.ColorEnabled(out)}
	err := env.up(ctx, opts)
	defer func() {
		if stopErr := env.down(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	if err != nil {
		return err
	}
	return env.serve(ctx)
}

// devEnvironment is what `charter dev` runs: a cluster (a local control
// plane it owns, or one given by --kubeconfig) with charter's CRDs, and,
// as they are built, charter's controllers against it.
type devEnvironment struct {
	out   io.Writer
	color bool

	cp             *controlplane.ControlPlane // nil when the cluster is not ours
	cfg            *rest.Config
	kubeconfigPath string
}

// up brings the cluster to the point where charter can run against it.
func (e *devEnvironment) up(ctx context.Context, opts devOptions) error {
	e.title("charter dev")
	if err := e.connect(ctx, opts); err != nil {
		return err
	}
	if len(opts.crds) > 0 {
		crds, err := controlplane.InstallCRDs(ctx, e.cfg, opts.crds...)
		if err != nil {
			return err
		}
		e.done("%d CRDs installed from %s", len(crds), joinPaths(opts.crds))
	}
	e.ready()
	return nil
}

func (e *devEnvironment) connect(ctx context.Context, opts devOptions) error {
	if opts.kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", opts.kubeconfig)
		if err != nil {
			return fmt.Errorf("loading --kubeconfig %s: %w", opts.kubeconfig, err)
		}
		e.cfg, e.kubeconfigPath = cfg, opts.kubeconfig
		e.done("using the cluster at %s", cfg.Host)
		return nil
	}

	cpOpts := []controlplane.Option{controlplane.WithKeepLogs(opts.keepLogs)}
	if opts.binDir != "" {
		cpOpts = append(cpOpts, controlplane.WithBinaryDir(opts.binDir))
	}
	started := time.Now()
	// A failed Start has already stopped whatever it started and says
	// where its logs are, so e.cp is set only once there is a cluster to stop.
	cp := controlplane.New(cpOpts...)
	if err := cp.Start(ctx); err != nil {
		return err
	}
	e.cp = cp
	e.cfg, e.kubeconfigPath = e.cp.RESTConfig(), e.cp.KubeconfigPath()
	e.done("control plane started in %s at %s %s", time.Since(started).Round(100*time.Millisecond),
		e.cfg.Host, e.dim("(logs: "+e.cp.LogDir()+")"))
	return nil
}

// serve runs until ctx ends. Controllers join here as they are built.
func (e *devEnvironment) serve(ctx context.Context) error {
	<-ctx.Done()
	fmt.Fprintln(e.out)
	return nil
}

// down stops what up started; a cluster given by --kubeconfig is left alone.
func (e *devEnvironment) down() error {
	if e.cp == nil {
		return nil
	}
	fmt.Fprintln(e.out, "stopping the control plane...")
	if err := e.cp.Stop(); err != nil {
		return err
	}
	if e.cp.LogsKept() {
		e.done("stopped; logs kept in %s", e.cp.LogDir())
	} else {
		e.done("stopped")
	}
	return nil
}

func (e *devEnvironment) ready() {
	e.done("kubeconfig: %s", e.kubeconfigPath)
	fmt.Fprintf(e.out, "\nTry:\n\n  %s\n\n%s\n",
		printer.Paint(e.color, printer.Bold, "KUBECONFIG="+e.kubeconfigPath+" kubectl get cpol"),
		e.dim("Ctrl-C stops charter dev."))
}

func (e *devEnvironment) title(s string) {
	fmt.Fprintln(e.out, printer.Paint(e.color, printer.Bold, s))
}

func (e *devEnvironment) done(format string, args ...any) {
	fmt.Fprintf(e.out, "  %s %s\n", printer.Paint(e.color, printer.Green, "✓"), fmt.Sprintf(format, args...))
}

func (e *devEnvironment) dim(s string) string {
	if !e.color {
		return s
	}
	return "\x1b[2m" + s + "\x1b[0m"
}

func joinPaths(paths []string) string {
	if len(paths) == 1 {
		return paths[0]
	}
	return fmt.Sprint(paths)
}
