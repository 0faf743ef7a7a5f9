package reportsstore

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/apitesting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/storage"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"

	"github.com/charter-dev/charter/internal/localpg"
	"github.com/charter-dev/charter/internal/localpg/localpgtest"
)

// The storage.Interface conformance suite k8s.io/apiserver runs against
// etcd3's store (pkg/storage/testing), run here against PostgreSQL, on the
// example API's Pods as upstream does. Each test gets a database of its
// own on one server.
//
// Left out: the suites that need etcd itself (TTLs, transformers, etcd
// client recorders), and RunWatchSemantics and
// RunTestOptionalWatchBookmarksWithCorrectResourceVersion, which expect
// events within 150 ms and bookmarks within 3 s: timings a loaded CI
// machine does not keep (the watch semantics they cover are in
// WatchFromZero, SendInitialEventsBackwardCompatibility,
// WatchSemanticInitialEventsExtended and WatchListMatchSingle).

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(examplev1.AddToScheme(scheme))
}

var (
	server    *localpg.Server
	databases atomic.Int64
)

// testServer starts the package's server at the first test that needs it.
func testServer(t *testing.T) *localpg.Server {
	t.Helper()
	if server == nil {
		server = localpgtest.StartShared(t)
	}
	return server
}

func TestMain(m *testing.M) {
	code := m.Run()
	if server != nil {
		if err := server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		if code == 0 {
			_ = os.RemoveAll(server.Dir())
		}
	}
	os.Exit(code)
}

// newTestDB opens a fresh database on the package's server.
func newTestDB(t *testing.T) *DB {
	t.Helper()
	srv := testServer(t)
	ctx := context.Background()
	name := fmt.Sprintf("test_%d", databases.Add(1))
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	cfg, err := pgx.ParseConfig(srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	db, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func newPod() runtime.Object     { return &example.Pod{} }
func newPodList() runtime.Object { return &example.PodList{} }

func podStore(t *testing.T) (context.Context, *Store) {
	db := newTestDB(t)
	codec := apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion)
	return context.Background(), db.NewStore("/pods/", codec, newPod, newPodList)
}

// storedWithoutRV checks what Create stored: the object without its
// resourceVersion, as etcd3 stores it.
func storedWithoutRV(s *Store) storagetesting.KeyValidation {
	return func(ctx context.Context, t *testing.T, key string) {
		var data []byte
		if err := s.db.pool.QueryRow(ctx, `SELECT value FROM charter_objects WHERE key = $1`, key).Scan(&data); err != nil {
			t.Fatalf("reading %s: %v", key, err)
		}
		obj, err := runtime.Decode(s.codec, data)
		if err != nil {
			t.Fatalf("decoding %s: %v", key, err)
		}
		if rv := obj.(*example.Pod).ResourceVersion; rv != "" {
			t.Errorf("%s stored with resourceVersion %q", key, rv)
		}
	}
}

// compaction removes the events up to a resourceVersion.
func compaction(s *Store) storagetesting.Compaction {
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		rv, err := s.versioner.ParseResourceVersion(resourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.db.CompactThrough(ctx, int64(rv)); err != nil {
			t.Fatal(err)
		}
	}
}

// increaseRV writes nothing at a new resourceVersion.
func increaseRV(s *Store) storagetesting.IncreaseRVFunc {
	return func(ctx context.Context, t *testing.T) int64 {
		rv, err := s.db.write(ctx, func(pgx.Tx, int64) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return rv
	}
}

func noCallsValidation(*testing.T, uint64, uint64) {}

func TestConformance(t *testing.T) {
	tests := map[string]func(ctx context.Context, t *testing.T, s *Store){
		"Create": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestCreate(ctx, t, s, storedWithoutRV(s))
		},
		"CreateWithKeyExist": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestCreateWithKeyExist(ctx, t, s) },
		"Get":                func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestGet(ctx, t, s) },
		"UnconditionalDelete": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestUnconditionalDelete(ctx, t, s)
		},
		"ConditionalDelete": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestConditionalDelete(ctx, t, s) },
		"DeleteWithSuggestion": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestDeleteWithSuggestion(ctx, t, s)
		},
		"DeleteWithSuggestionAndConflict": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestDeleteWithSuggestionAndConflict(ctx, t, s)
		},
		"DeleteWithConflict": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestDeleteWithConflict(ctx, t, s) },
		"DeleteWithSuggestionOfDeletedObject": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestDeleteWithSuggestionOfDeletedObject(ctx, t, s)
		},
		"ValidateDeletionWithSuggestion": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestValidateDeletionWithSuggestion(ctx, t, s)
		},
		"ValidateDeletionWithOnlySuggestionValid": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestValidateDeletionWithOnlySuggestionValid(ctx, t, s)
		},
		"PreconditionalDeleteWithSuggestion": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestPreconditionalDeleteWithSuggestion(ctx, t, s)
		},
		"PreconditionalDeleteWithOnlySuggestionPass": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass(ctx, t, s)
		},
		"ListPaging": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestListPaging(ctx, t, s) },
		"GetListNonRecursive": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestGetListNonRecursive(ctx, t, increaseRV(s), s)
		},
		"GetListRecursivePrefix": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestGetListRecursivePrefix(ctx, t, s)
		},
		"ListContinuation": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestListContinuation(ctx, t, s, noCallsValidation)
		},
		"ListPaginationRareObject": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestListPaginationRareObject(ctx, t, s, noCallsValidation)
		},
		"ListContinuationWithFilter": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestListContinuationWithFilter(ctx, t, s, noCallsValidation)
		},
		"NamespaceScopedList": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestNamespaceScopedList(ctx, t, s)
		},
		"GuaranteedUpdateWithConflict": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestGuaranteedUpdateWithConflict(ctx, t, s)
		},
		"GuaranteedUpdateWithSuggestionAndConflict": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict(ctx, t, s)
		},
		"Watch":              func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestWatch(ctx, t, s) },
		"DeleteTriggerWatch": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestDeleteTriggerWatch(ctx, t, s) },
		"WatchFromZero": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestWatchFromZero(ctx, t, s, compaction(s))
		},
		"WatchFromNonZero":   func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestWatchFromNonZero(ctx, t, s) },
		"WatchContextCancel": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestWatchContextCancel(ctx, t, s) },
		"WatchDeleteEventObjectHaveLatestRV": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV(ctx, t, s)
		},
		"ClusterScopedWatch": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestClusterScopedWatch(ctx, t, s) },
		"NamespaceScopedWatch": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestNamespaceScopedWatch(ctx, t, s)
		},
		"SendInitialEventsBackwardCompatibility": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunSendInitialEventsBackwardCompatibility(ctx, t, s)
		},
		"ListInconsistentContinuation": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestListInconsistentContinuation(ctx, t, s, compaction(s))
		},
		"ConsistentList": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestConsistentList(ctx, t, s, increaseRV(s), false, true, false)
		},
		"CompactRevision": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestCompactRevision(ctx, t, s, increaseRV(s), compaction(s))
		},
		"KeySchema": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestKeySchema(ctx, t, s) },
		"DelayedWatchDelivery": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestDelayedWatchDelivery(ctx, t, s)
		},
		"WatcherTimeout": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunTestWatcherTimeout(ctx, t, s) },
		"WatchInitializationSignal": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestWatchInitializationSignal(ctx, t, s)
		},
		"WatchDispatchBookmarkEvents": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunTestWatchDispatchBookmarkEvents(ctx, t, s, false)
		},
		"WatchSemanticInitialEventsExtended": func(ctx context.Context, t *testing.T, s *Store) {
			storagetesting.RunWatchSemanticInitialEventsExtended(ctx, t, s)
		},
		"WatchListMatchSingle": func(ctx context.Context, t *testing.T, s *Store) { storagetesting.RunWatchListMatchSingle(ctx, t, s) },
	}
	for name, run := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, s := podStore(t)
			run(ctx, t, s)
		})
	}
}

var _ storage.Interface = (*Store)(nil)
