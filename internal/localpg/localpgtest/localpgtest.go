// Package localpgtest starts a private PostgreSQL server (localpg) for one
// test. A machine without PostgreSQL skips the test, unless
// CHARTER_REQUIRE_POSTGRES is set (as .ci/run does), which fails it.
package localpgtest

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/charter-dev/charter/internal/localpg"
)

// Start starts a server in a fresh folder that the test's cleanup stops and
// removes (keeping it, with its log, when the test failed).
func Start(t testing.TB) *localpg.Server {
	t.Helper()
	srv := StartShared(t)
	dir := srv.Dir()
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("PostgreSQL folder kept: %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return srv
}

// StartShared starts a server for a package's tests to share: the caller
// stops it (typically in TestMain, after m.Run) and removes its Dir.
func StartShared(t testing.TB) *localpg.Server {
	t.Helper()
	skipWithoutPostgres(t)
	dir, err := localpg.TempDir("")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := localpg.Start(context.Background(), dir)
	if err != nil {
		t.Fatalf("starting PostgreSQL in %s: %v", dir, err)
	}
	return srv
}

func skipWithoutPostgres(t testing.TB) {
	t.Helper()
	if _, err := localpg.BinDir(); errors.Is(err, localpg.ErrNotInstalled) {
		if os.Getenv(localpg.RequireEnv) != "" {
			t.Fatalf("%v (%s is set)", err, localpg.RequireEnv)
		}
		t.Skipf("%v; set %s to make this a failure", err, localpg.RequireEnv)
	}
}
