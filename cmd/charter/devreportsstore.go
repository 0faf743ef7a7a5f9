package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/reportsserver"
)

// The stores `charter dev --reports-store` keeps reports in.
const (
	reportsStoreEtcd     = "etcd"
	reportsStorePostgres = "postgres"
)

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

// installCRDs installs the CRDs of paths, but for the report APIs' when
// reports go to PostgreSQL.
func (e *devEnvironment) installCRDs(ctx context.Context, opts devOptions) error {
	crds, err := controlplane.ReadCRDs(opts.crds...)
	if err != nil {
		return err
	}
	if opts.reportsStore == reportsStorePostgres {
		crds = slices.DeleteFunc(crds, reportsserver.ServesCRD)
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
	// The reports server logs through klog: to dev's log file, not the
	// console.
	if _, err := e.logToFile(); err != nil {
		return err
	}
	local, err := reportsserver.StartLocal(ctx, e.cfg, e.kubeconfigPath)
	e.reportsStore = local
	if err != nil {
		return err
	}
	e.done("reports in PostgreSQL, served by charter reports-server on 127.0.0.1:%d, in %s %s", local.Port(),
		time.Since(started).Round(100*time.Millisecond), e.dim("(data: "+local.DataDir()+")"))
	return nil
}
