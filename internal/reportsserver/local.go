package reportsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/internal/localpg"
)

// The Service the APIServices of a local reports server point at: an
// ExternalName for localhost, a local control plane having no cluster
// network.
const (
	LocalNamespace = "charter-system"
	LocalService   = "charter-reports-server"
)

// ServesCRD tells the CRDs of the report APIs the server serves, which
// must then not be installed: kube-apiserver would otherwise keep serving
// them from etcd beside the APIServices.
func ServesCRD(crd *apiextensionsv1.CustomResourceDefinition) bool {
	gvs, err := GroupVersions()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(gvs, func(gv schema.GroupVersion) bool { return gv.Group == crd.Spec.Group })
}

// Local is a private PostgreSQL server (localpg) and a reports server in
// this process, registered with a control plane on this machine: what
// `charter dev --reports-store=postgres`, the reports-server e2e specs
// and bench-reports -store=postgres run.
type Local struct {
	dir    string
	pg     *localpg.Server
	port   int
	stop   context.CancelFunc
	served chan error
}

// StartLocal starts PostgreSQL in a fresh folder of the temporary folder
// and the reports server on a free port of 127.0.0.1, delegating to the
// kube-apiserver of kubeconfig (a file, as the server's delegated
// authentication reads it), and registers the report APIs with that
// kube-apiserver (cfg), waiting until they are routed. The report CRDs
// must not be installed (ServesCRD). Stop with Shutdown, also when
// StartLocal fails.
func StartLocal(ctx context.Context, cfg *rest.Config, kubeconfig string) (*Local, error) {
	dir, err := localpg.TempDir("")
	if err != nil {
		return nil, err
	}
	l := &Local{dir: dir, served: make(chan error, 1)}
	if l.pg, err = localpg.Start(ctx, filepath.Join(dir, "postgres")); err != nil {
		return l, fmt.Errorf("starting PostgreSQL for the reports: %w", err)
	}
	o := NewOptions()
	o.DSN = l.pg.DSN()
	o.Kubeconfig = kubeconfig
	o.ServingNames = []string{LocalService + "." + LocalNamespace + ".svc"}
	o.SecureServing.ServerCert.CertDirectory = filepath.Join(dir, "certs")
	if o.SecureServing.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return l, err
	}
	srv, err := o.New(ctx)
	if err != nil {
		return l, err
	}
	l.port = srv.Port()
	runCtx, stop := context.WithCancel(context.Background())
	l.stop = stop
	go func() { l.served <- srv.Run(runCtx) }()
	regCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = Register(regCtx, cfg, Registration{
		Namespace: LocalNamespace, Service: LocalService, ExternalName: "localhost",
		Port: srv.Port(), CABundle: srv.CABundle(),
	})
	return l, err
}

// Port is the port the reports server listens on.
func (l *Local) Port() int { return l.port }

// DataDir is PostgreSQL's folder.
func (l *Local) DataDir() string {
	if l.pg == nil {
		return ""
	}
	return l.pg.Dir()
}

// DSN is the PostgreSQL database's connection string.
func (l *Local) DSN() string { return l.pg.DSN() }

// Shutdown stops the reports server, then PostgreSQL, and removes their
// folder (kept when something failed, for its log).
func (l *Local) Shutdown() error {
	var errs []error
	if l.stop != nil {
		l.stop()
		if err := <-l.served; err != nil {
			errs = append(errs, fmt.Errorf("reports server: %w", err))
		}
	}
	if l.pg != nil {
		if err := l.pg.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(l.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
