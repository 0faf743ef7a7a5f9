// Package cluster gives tests and tools a Kubernetes cluster to work against,
// behind one interface with two providers: kind (a real cluster in Docker,
// with nodes that run Pods) and local (etcd and kube-apiserver as processes
// on this machine, no Docker needed, Pods stored but never run).
//
// FromEnvironment picks one the way `make e2e` documents: E2E_PROVIDER when
// set, else kind when a Docker engine answers, else local.
package cluster

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/internal/controlplane"
)

// Provider names, as accepted by New and E2E_PROVIDER.
const (
	KindProvider  = "kind"
	LocalProvider = "local"
)

// DefaultName is the cluster name used when none is given.
const DefaultName = "charter-e2e"

// Provider is a cluster the caller starts, uses through its kubeconfig or
// REST config, and stops. Stop is safe after a failed Start.
type Provider interface {
	// Name is the provider's kind: "kind" or "local".
	Name() string
	// Start creates the cluster (or, for kind, adopts an existing one of the
	// same name) and returns once its API server answers.
	Start(ctx context.Context) error
	// RESTConfig is the administrator's configuration; nil before Start.
	RESTConfig() *rest.Config
	// KubeconfigPath is a kubeconfig file for the administrator, private to
	// this provider; empty before Start.
	KubeconfigPath() string
	// ExportLogs writes the cluster's logs into dir, creating it.
	ExportLogs(ctx context.Context, dir string) error
	// HostAddress is the IP address at which the cluster's API server
	// reaches this machine: where a webhook served by a process here
	// listens, and the host of the URL the webhook configuration names.
	// It fails, saying why, when the API server cannot reach this machine
	// (kind on Docker Desktop). Call it after Start.
	HostAddress(ctx context.Context) (string, error)
	// Stop tears down what Start created.
	Stop(ctx context.Context) error
}

// ImageLoader is implemented by providers whose nodes run containers: it
// makes the images in a `docker save` archive available to them without a
// registry.
type ImageLoader interface {
	LoadImageArchive(ctx context.Context, path string) error
}

// Option configures the providers made by New and FromEnvironment.
type Option func(*settings)

type settings struct {
	name          string
	kindConfig    string
	kindNodeImage string
	keepCluster   bool
	local         []controlplane.Option
	dockerHost    string
	probe         func(ctx context.Context, host string) error
}

// WithName sets the kind cluster's name (default DefaultName).
func WithName(name string) Option { return func(s *settings) { s.name = name } }

// WithKindConfig creates kind clusters from this kind configuration file
// (kind.x-k8s.io/v1alpha4 Cluster) instead of the single-node default.
func WithKindConfig(path string) Option { return func(s *settings) { s.kindConfig = path } }

// WithKindNodeImage sets the kindest/node image of new kind clusters.
func WithKindNodeImage(image string) Option { return func(s *settings) { s.kindNodeImage = image } }

// WithKeepCluster makes Stop leave a kind cluster it created in place, for
// `make kind-create` and for looking around after a run.
func WithKeepCluster(keep bool) Option { return func(s *settings) { s.keepCluster = keep } }

// WithLocalOptions passes options to the local control plane.
func WithLocalOptions(opts ...controlplane.Option) Option {
	return func(s *settings) { s.local = append(s.local, opts...) }
}

// WithDockerHost sets the Docker endpoint to probe (default $DOCKER_HOST,
// else the standard socket).
func WithDockerHost(host string) Option { return func(s *settings) { s.dockerHost = host } }

func newSettings(opts []Option) settings {
	s := settings{name: DefaultName, probe: DockerAvailable}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// New returns the provider called name ("kind" or "local"), not started.
func New(name string, opts ...Option) (Provider, error) {
	s := newSettings(opts)
	switch name {
	case KindProvider:
		return newKind(s), nil
	case LocalProvider:
		return newLocal(s), nil
	default:
		return nil, fmt.Errorf("unknown cluster provider %q: want %q or %q", name, KindProvider, LocalProvider)
	}
}

// InstallCRDs server-side applies the CRDs found in paths into the cluster
// and waits until they are served.
func InstallCRDs(ctx context.Context, p Provider, paths ...string) error {
	cfg := p.RESTConfig()
	if cfg == nil {
		return fmt.Errorf("installing CRDs: the %s cluster is not started", p.Name())
	}
	_, err := controlplane.InstallCRDs(ctx, cfg, paths...)
	return err
}
