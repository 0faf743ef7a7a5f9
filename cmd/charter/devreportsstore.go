package main

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

	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/localpg"
	"github.com/charter-dev/charter/internal/reportsserver"
)

// The stores `charter dev --reports-store` keeps reports in.
const (
	reportsStoreEtcd     = "etcd"
	reportsStorePostgres = "postgres"
)

// The Service the APIServices of dev's reports server point at: an
// ExternalName for localhost, the local control plane having no cluster
// network.
const (
	devReportsServerNamespace = "charter-system"
	devReportsServerService   = "charter-reports-server"
)

// devReportsStore is the PostgreSQL server and the reports server that
// `charter dev --reports-store=postgres` runs beside the control plane.
type devReportsStore struct {
	dir    string
	pg     *localpg.Server
	stop   context.CancelFunc
	served chan error
}

func validateReportsStore(store, kubeconfig string) error {
	switch store {
	case reportsStoreEtcd:
		return nil
	case reportsStorePostgres:
		if kubeconfig != "" {
			return errors.New("--reports-store=postgres runs the reports server beside the local control plane: it cannot be used with --kubeconfig")
		}
		return nil
	}
	return fmt.Errorf("--reports-store %q: want %s or %s", store, reportsStoreEtcd, reportsStorePostgres)
}

// reportCRD tells the CRDs of the report APIs, which reports-server serves
// instead: kube-apiserver would otherwise keep serving them from etcd
// beside the APIServices.
func reportCRD(crd *apiextensionsv1.CustomResourceDefinition) bool {
	gvs, err := reportsserver.GroupVersions()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(gvs, func(gv schema.GroupVersion) bool { return gv.Group == crd.Spec.Group })
}

// installCRDs installs the CRDs of paths, but for the report APIs' when
// reports go to PostgreSQL.
func (e *devEnvironment) installCRDs(ctx context.Context, opts devOptions) error {
	crds, err := controlplane.ReadCRDs(opts.crds...)
	if err != nil {
		return err
	}
	if opts.reportsStore == reportsStorePostgres {
		crds = slices.DeleteFunc(crds, reportCRD)
	}
	if err := controlplane.ApplyCRDs(ctx, e.cfg, crds); err != nil {
		return err
	}
	e.done("%d CRDs installed from %s", len(crds), joinPaths(opts.crds))
	return nil
}

// startReportsStore starts PostgreSQL and the reports server, and
// registers the report APIs with kube-apiserver.
func (e *devEnvironment) startReportsStore(ctx context.Context) error {
	started := time.Now()
	if _, err := e.logToFile(); err != nil {
		return err
	}
	dir, err := localpg.TempDir("")
	if err != nil {
		return err
	}
	s := &devReportsStore{dir: dir, served: make(chan error, 1)}
	e.reportsStore = s
	if s.pg, err = localpg.Start(ctx, filepath.Join(dir, "postgres")); err != nil {
		return fmt.Errorf("starting PostgreSQL for the reports: %w", err)
	}
	o := reportsserver.NewOptions()
	o.DSN = s.pg.DSN()
	o.Kubeconfig = e.kubeconfigPath
	o.ServingNames = []string{devReportsServerService + "." + devReportsServerNamespace + ".svc"}
	o.SecureServing.ServerCert.CertDirectory = filepath.Join(dir, "certs")
	if o.SecureServing.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return err
	}
	srv, err := o.New(ctx)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { s.served <- srv.Run(runCtx) }()
	regCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := reportsserver.Register(regCtx, e.cfg, reportsserver.Registration{
		Namespace: devReportsServerNamespace, Service: devReportsServerService, ExternalName: "localhost",
		Port: srv.Port(), CABundle: srv.CABundle(),
	}); err != nil {
		return err
	}
	e.done("reports in PostgreSQL, served by charter reports-server on 127.0.0.1:%d, in %s %s", srv.Port(),
		time.Since(started).Round(100*time.Millisecond), e.dim("(data: "+s.pg.Dir()+")"))
	return nil
}

// shutdown stops the reports server, then PostgreSQL, and removes their folder.
func (s *devReportsStore) shutdown() error {
	var errs []error
	if s.stop != nil {
		s.stop()
		if err := <-s.served; err != nil {
			errs = append(errs, fmt.Errorf("reports server: %w", err))
		}
	}
	if s.pg != nil {
		if err := s.pg.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
