// Package controlplanetest starts the local control plane for integration
// tests, the one way every package's tests do it.
package controlplanetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/charter-dev/charter/internal/controlplane"
)

// Start starts etcd and kube-apiserver with charter's CRDs from
// config/crd/bases, stops them when the test ends, and keeps their logs
// (naming the folder) when it failed. ctx bounds the start and the
// control plane's life.
func Start(ctx context.Context, t testing.TB) *controlplane.ControlPlane {
	t.Helper()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			cp.KeepLogs()
			t.Logf("control plane logs kept in %s", cp.LogDir())
		}
		_ = cp.Stop()
	})
	return cp
}
