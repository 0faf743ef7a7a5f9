package localpg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/charter-dev/charter/internal/localpg/localpgtest"
)

// TestStartServesQueries starts a real server and runs a query on it.
func TestStartServesQueries(t *testing.T) {
	srv := localpgtest.Start(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var sum int
	if err := conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != 42 {
		t.Fatalf("SELECT 40 + 2 = %d", sum)
	}
}
