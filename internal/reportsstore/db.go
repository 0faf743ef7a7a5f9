// Package reportsstore keeps Kubernetes API objects in PostgreSQL behind
// k8s.io/apiserver's storage.Interface, the interface etcd3's store
// implements, so that a generic registry Store (and with it every REST
// verb, selectors, pagination, watch, finalizers and patches) serves reports
// from PostgreSQL exactly as kube-apiserver serves them from etcd.
//
// Three tables hold everything (Migrate creates them):
//
//   - charter_objects: one row per object, its storage key, the
//     resourceVersion it was last written at and its encoding (without
//     resourceVersion, as etcd3 stores it);
//   - charter_events: one row per write, at its resourceVersion, with the
//     object's new (or, for a deletion, last) encoding and the previous one
//     with its resourceVersion: what a watch replays, and what a list at a
//     past resourceVersion reads; Compact removes old rows;
//   - charter_revision: the current resourceVersion and the newest one
//     Compact removed.
//
// Every write increments charter_revision.current inside its transaction.
// That row lock serialises writers, so transactions commit in
// resourceVersion order: a reader that sees version N sees every write up
// to N, which makes resourceVersions monotonic and lets a watch resume from
// any version it was given that Compact has not removed (older ones get 410
// Gone, as etcd answers a compacted revision). Writers NOTIFY the channel
// charter_events; watches wake on it and also poll, so a lost notification
// only delays them.
package reportsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/klog/v2"
)

// notifyChannel is the PostgreSQL channel writers NOTIFY after each write.
const notifyChannel = "charter_events"

// schema is idempotent: Migrate runs it at every start. Keys compare
// bytewise (COLLATE "C") so that a prefix is a key range, as in etcd.
const schema = `
CREATE TABLE IF NOT EXISTS charter_objects (
	key   text COLLATE "C" PRIMARY KEY,
	rv    bigint NOT NULL,
	value bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS charter_events (
	rv         bigint PRIMARY KEY,
	key        text COLLATE "C" NOT NULL,
	type       text NOT NULL,
	value      bytea NOT NULL,
	prev_value bytea,
	prev_rv    bigint,
	at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS charter_events_key_rv ON charter_events (key, rv);
CREATE TABLE IF NOT EXISTS charter_revision (
	id        int PRIMARY KEY CHECK (id = 1),
	current   bigint NOT NULL,
	compacted bigint NOT NULL
);
INSERT INTO charter_revision (id, current, compacted) VALUES (1, 1, 0) ON CONFLICT (id) DO NOTHING;
`

// migrateLockID is the advisory lock that keeps two servers starting on
// one database from creating the tables at the same time.
const migrateLockID = 0x63686172746572 // "charter"

// DB is a connection pool to one PostgreSQL database holding objects of
// any number of resources (each under its own key prefix), with the
// listener that wakes watches.
type DB struct {
	pool      *pgxpool.Pool
	wake      broadcaster
	compacted atomic.Int64
	cancel    context.CancelFunc
	done      sync.WaitGroup
}

// Open connects to the database dsn names (a PostgreSQL URL or key=value
// string), creates the tables when missing and starts listening for
// writes. Close releases it.
func Open(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("reports database DSN: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the reports database: %w", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	db := &DB{pool: pool, cancel: cancel}
	db.wake.init()
	var compacted int64
	if err := pool.QueryRow(ctx, `SELECT compacted FROM charter_revision WHERE id = 1`).Scan(&compacted); err != nil {
		db.Close()
		return nil, fmt.Errorf("reading the reports database revision: %w", err)
	}
	db.compacted.Store(compacted)
	listening := make(chan error, 1)
	db.done.Add(1)
	go db.listen(lctx, listening)
	if err := <-listening; err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Migrate creates the tables the store uses when they are missing.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("creating the reports tables: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockID)); err != nil {
		return fmt.Errorf("creating the reports tables: %w", err)
	}
	if _, err := tx.Exec(ctx, schema); err != nil {
		return fmt.Errorf("creating the reports tables: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("creating the reports tables: %w", err)
	}
	return nil
}

// Pool is the connection pool, for callers that read the tables directly.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Close stops the listener and closes the pool. Open watches end.
func (db *DB) Close() {
	db.cancel()
	db.done.Wait()
	db.pool.Close()
	db.wake.fire()
}

// listen holds a connection LISTENing on notifyChannel and wakes the
// watches at every notification. It reconnects after an error, waking the
// watches then too (they read what they may have missed).
func (db *DB) listen(ctx context.Context, started chan<- error) {
	defer db.done.Done()
	first := true
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, db.pool.Config().ConnConfig.Copy())
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+notifyChannel)
		}
		if first {
			first = false
			if err != nil {
				err = fmt.Errorf("listening for reports database writes: %w", err)
			}
			started <- err
			if err != nil {
				if conn != nil {
					_ = conn.Close(context.Background())
				}
				return
			}
		}
		for err == nil {
			_, err = conn.WaitForNotification(ctx)
			db.wake.fire()
		}
		if conn != nil {
			_ = conn.Close(context.Background())
		}
		if ctx.Err() != nil {
			return
		}
		klog.ErrorS(err, "reports database listener lost its connection; reconnecting")
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// errConflict aborts a write whose object changed since it was read.
var errConflict = errors.New("object changed since it was read")

// write runs fn in a transaction that has taken the next resourceVersion
// (holding the revision row until commit, which orders commits) and
// notifies the watches once fn succeeded.
func (db *DB) write(ctx context.Context, fn func(tx pgx.Tx, rv int64) error) (int64, error) {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var rv int64
	if err := tx.QueryRow(ctx, `UPDATE charter_revision SET current = current + 1 WHERE id = 1 RETURNING current`).Scan(&rv); err != nil {
		return 0, err
	}
	if err := fn(tx, rv); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, fmt.Sprint(rv)); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	// This process's watches need not wait for the notification's round
	// trip; other servers' watches get the notification.
	db.wake.fire()
	return rv, nil
}

// Compact removes the events older than retention and returns the newest
// resourceVersion removed (0 when none was): a watch from an older version
// gets 410 Gone from then on.
func (db *DB) Compact(ctx context.Context, retention time.Duration) (int64, error) {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var newest int64
	err = tx.QueryRow(ctx, `WITH gone AS (
		DELETE FROM charter_events WHERE at < now() - make_interval(secs => $1) RETURNING rv
	) SELECT coalesce(max(rv), 0) FROM gone`, retention.Seconds()).Scan(&newest)
	if err != nil {
		return 0, fmt.Errorf("compacting the reports events: %w", err)
	}
	if newest > 0 {
		if _, err := tx.Exec(ctx, `UPDATE charter_revision SET compacted = greatest(compacted, $1) WHERE id = 1`, newest); err != nil {
			return 0, fmt.Errorf("compacting the reports events: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("compacting the reports events: %w", err)
	}
	if newest > db.compacted.Load() {
		db.compacted.Store(newest)
	}
	return newest, nil
}

// CompactThrough removes the events up to resourceVersion rv (a test's
// way to make a resourceVersion too old at once).
func (db *DB) CompactThrough(ctx context.Context, rv int64) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `DELETE FROM charter_events WHERE rv <= $1`, rv); err != nil {
		return fmt.Errorf("compacting the reports events: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE charter_revision SET compacted = greatest(compacted, $1) WHERE id = 1`, rv); err != nil {
		return fmt.Errorf("compacting the reports events: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("compacting the reports events: %w", err)
	}
	if rv > db.compacted.Load() {
		db.compacted.Store(rv)
	}
	return nil
}

// RunCompaction calls Compact every interval until ctx ends.
func (db *DB) RunCompaction(ctx context.Context, interval, retention time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := db.Compact(ctx, retention); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "compacting the reports database")
			}
		}
	}
}

// broadcaster wakes every goroutine waiting on the channel it last handed
// out.
type broadcaster struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcaster) init() { b.ch = make(chan struct{}) }

// next is closed at the next fire.
func (b *broadcaster) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcaster) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}
