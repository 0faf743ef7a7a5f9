package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"
)

// defaultKindConfig is a single node: enough for admission, reports and
// background work, and quickest to create.
const defaultKindConfig = `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
`

// kindReadyTimeout bounds the wait for the control plane node to be Ready.
const kindReadyTimeout = 3 * time.Minute

// Kind is a kind cluster: Kubernetes nodes as Docker containers. Start adopts
// an existing cluster of the same name (and Stop then leaves it), otherwise
// creates one (and Stop deletes it unless WithKeepCluster).
type Kind struct {
	s          settings
	provider   *kindcluster.Provider
	dir        string // private folder for the kubeconfig file
	kubeconfig string
	cfg        *rest.Config
	created    bool
}

var (
	_ Provider    = (*Kind)(nil)
	_ ImageLoader = (*Kind)(nil)
)

func newKind(s settings) *Kind { return &Kind{s: s} }

// Name returns "kind".
func (k *Kind) Name() string { return KindProvider }

// ClusterName is the kind cluster's name.
func (k *Kind) ClusterName() string { return k.s.name }

// Start checks that Docker answers (failing at once if not), then adopts or
// creates the cluster and writes a private kubeconfig file for it.
func (k *Kind) Start(ctx context.Context) error {
	if k.provider != nil {
		return errors.New("kind cluster already started")
	}
	if err := k.s.probe(ctx, k.s.dockerHost); err != nil {
		return fmt.Errorf("kind needs Docker: %w; use the local provider instead", err)
	}
	k.provider = kindcluster.NewProvider(kindcluster.ProviderWithDocker(), kindcluster.ProviderWithLogger(kindcmd.NewLogger()))

	dir, err := os.MkdirTemp("", "charter-kind-")
	if err != nil {
		return err
	}
	k.dir = dir
	k.kubeconfig = filepath.Join(dir, "kubeconfig")

	existing, err := k.provider.List()
	if err != nil {
		return fmt.Errorf("listing kind clusters: %w", err)
	}
	if !slices.Contains(existing, k.s.name) {
		createOpts := []kindcluster.CreateOption{
			kindcluster.CreateWithWaitForReady(kindReadyTimeout),
			kindcluster.CreateWithKubeconfigPath(k.kubeconfig),
			kindcluster.CreateWithDisplayUsage(false),
			kindcluster.CreateWithDisplaySalutation(false),
		}
		if k.s.kindConfig != "" {
			createOpts = append(createOpts, kindcluster.CreateWithConfigFile(k.s.kindConfig))
		} else {
			createOpts = append(createOpts, kindcluster.CreateWithRawConfig([]byte(defaultKindConfig)))
		}
		if k.s.kindNodeImage != "" {
			createOpts = append(createOpts, kindcluster.CreateWithNodeImage(k.s.kindNodeImage))
		}
		// kind's API takes no context; its own ready timeout bounds the wait.
		if err := k.provider.Create(k.s.name, createOpts...); err != nil {
			return fmt.Errorf("creating kind cluster %q: %w", k.s.name, err)
		}
		k.created = true
	}

	raw, err := k.provider.KubeConfig(k.s.name, false)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig of kind cluster %q: %w", k.s.name, err)
	}
	if err := os.WriteFile(k.kubeconfig, []byte(raw), 0o600); err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(raw))
	if err != nil {
		return fmt.Errorf("kubeconfig of kind cluster %q: %w", k.s.name, err)
	}
	k.cfg = cfg
	return ctx.Err()
}

// RESTConfig returns the administrator's configuration.
func (k *Kind) RESTConfig() *rest.Config {
	if k.cfg == nil {
		return nil
	}
	return rest.CopyConfig(k.cfg)
}

// KubeconfigPath returns the private kubeconfig file written by Start.
func (k *Kind) KubeconfigPath() string { return k.kubeconfig }

// ExportKubeconfig merges the cluster into a kubeconfig file the way `kind
// export kubeconfig` does; an empty path means $KUBECONFIG or ~/.kube/config.
func (k *Kind) ExportKubeconfig(path string) error {
	if k.provider == nil {
		return errors.New("kind cluster not started")
	}
	return k.provider.ExportKubeConfig(k.s.name, path, false)
}

// LoadImageArchive loads the images of a `docker save` archive into every
// node, as `kind load image-archive` does.
func (k *Kind) LoadImageArchive(_ context.Context, path string) error {
	if k.provider == nil {
		return errors.New("kind cluster not started")
	}
	nodes, err := k.provider.ListInternalNodes(k.s.name)
	if err != nil {
		return fmt.Errorf("listing the nodes of kind cluster %q: %w", k.s.name, err)
	}
	if len(nodes) == 0 {
		return fmt.Errorf("kind cluster %q has no nodes", k.s.name)
	}
	for _, node := range nodes {
		if err := loadArchive(node, path); err != nil {
			return err
		}
	}
	return nil
}

func loadArchive(node nodes.Node, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("loading image archive: %w", err)
	}
	defer f.Close()
	if err := nodeutils.LoadImageArchive(node, f); err != nil {
		return fmt.Errorf("loading %s into node %s: %w", path, node, err)
	}
	return nil
}

// ExportLogs collects the nodes' logs (kubelet, containerd, pods) into dir,
// as `kind export logs` does.
func (k *Kind) ExportLogs(_ context.Context, dir string) error {
	if k.provider == nil {
		return errors.New("kind cluster not started: no logs")
	}
	if err := k.provider.CollectLogs(k.s.name, dir); err != nil {
		return fmt.Errorf("collecting logs of kind cluster %q: %w", k.s.name, err)
	}
	return nil
}

// Stop deletes the cluster if Start created it (unless WithKeepCluster) and
// removes the private kubeconfig file.
func (k *Kind) Stop(context.Context) error {
	var errs []error
	if k.provider != nil && k.created && !k.s.keepCluster {
		if err := k.provider.Delete(k.s.name, k.kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("deleting kind cluster %q: %w", k.s.name, err))
		}
		k.created = false
	}
	if k.dir != "" {
		if err := os.RemoveAll(k.dir); err != nil {
			errs = append(errs, err)
		}
		k.dir = ""
	}
	return errors.Join(errs...)
}

// Delete deletes the kind cluster of this name whether or not this process
// created it (for `make kind-delete`). Deleting a cluster that does not
// exist succeeds.
func (k *Kind) Delete(ctx context.Context) error {
	if err := k.s.probe(ctx, k.s.dockerHost); err != nil {
		return fmt.Errorf("kind needs Docker: %w", err)
	}
	p := kindcluster.NewProvider(kindcluster.ProviderWithDocker(), kindcluster.ProviderWithLogger(kindcmd.NewLogger()))
	if err := p.Delete(k.s.name, ""); err != nil {
		return fmt.Errorf("deleting kind cluster %q: %w", k.s.name, err)
	}
	return nil
}
