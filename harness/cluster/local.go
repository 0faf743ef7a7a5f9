package cluster

import (
	"context"
	"errors"

	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/internal/controlplane"
)

// Local is a control plane of etcd, kube-apiserver and
// kube-controller-manager processes on this machine (see
// internal/controlplane), so that namespaces are deleted and owned objects
// garbage-collected as on a real cluster. It needs the binaries `make
// controlplane` builds, and nothing else.
type Local struct {
	opts []controlplane.Option
	cp   *controlplane.ControlPlane
}

var _ Provider = (*Local)(nil)

func newLocal(s settings) *Local { return NewLocal(s.local...) }

// NewLocal returns a local provider, not started, running
// kube-controller-manager besides opts.
func NewLocal(opts ...controlplane.Option) *Local {
	return &Local{opts: append([]controlplane.Option{controlplane.WithControllerManager()}, opts...)}
}

// Name returns "local".
func (l *Local) Name() string { return LocalProvider }

// Start launches the control plane.
func (l *Local) Start(ctx context.Context) error {
	if l.cp != nil {
		return errors.New("local cluster already started")
	}
	l.cp = controlplane.New(l.opts...)
	return l.cp.Start(ctx)
}

// RESTConfig returns the administrator's configuration.
func (l *Local) RESTConfig() *rest.Config {
	if l.cp == nil {
		return nil
	}
	return l.cp.RESTConfig()
}

// KubeconfigPath returns the kubeconfig file in the control plane's work folder.
func (l *Local) KubeconfigPath() string {
	if l.cp == nil {
		return ""
	}
	return l.cp.KubeconfigPath()
}

// ControlPlane gives access to the underlying control plane (its log
// folder, KeepLogs); nil before Start.
func (l *Local) ControlPlane() *controlplane.ControlPlane { return l.cp }

// ExportLogs copies the control plane's logs (etcd, kube-apiserver,
// kube-controller-manager) into dir.
func (l *Local) ExportLogs(_ context.Context, dir string) error {
	if l.cp == nil {
		return errors.New("local cluster never started: no logs")
	}
	return l.cp.CopyLogs(dir)
}

// HostAddress returns the loopback address: the API server is a process
// on this machine.
func (l *Local) HostAddress(context.Context) (string, error) { return "127.0.0.1", nil }

// Stop stops the processes and removes the work folder.
func (l *Local) Stop(context.Context) error {
	if l.cp == nil {
		return nil
	}
	return l.cp.Stop()
}
