package reportsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// Store is the storage.Interface of one resource: the objects whose keys
// start with its resource prefix.
type Store struct {
	db             *DB
	codec          runtime.Codec
	versioner      storage.APIObjectVersioner
	resourcePrefix string
	newFunc        func() runtime.Object
	newListFunc    func() runtime.Object
}

var _ storage.Interface = (*Store)(nil)

// listChunk is how many rows a list or watch reads per query.
const listChunk = 500

// NewStore returns the storage of the resource whose keys start with
// resourcePrefix, encoding objects with codec.
func (db *DB) NewStore(resourcePrefix string, codec runtime.Codec, newFunc, newListFunc func() runtime.Object) *Store {
	return &Store{db: db, codec: codec, resourcePrefix: resourcePrefix, newFunc: newFunc, newListFunc: newListFunc}
}

// Versioner is storage.APIObjectVersioner: resourceVersions are decimal
// integers, as etcd's revisions.
func (s *Store) Versioner() storage.Versioner { return s.versioner }

func (s *Store) prepareKey(key string, recursive bool) (string, error) {
	return storage.PrepareKey(s.resourcePrefix, key, recursive)
}

// Create inserts obj at key unless the key exists.
func (s *Store) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	key, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	if version, err := s.versioner.ObjectResourceVersion(obj); err == nil && version != 0 {
		return storage.ErrResourceVersionSetOnCreate
	}
	if err := s.versioner.PrepareObjectForStorage(obj); err != nil {
		return fmt.Errorf("PrepareObjectForStorage failed: %w", err)
	}
	data, err := runtime.Encode(s.codec, obj)
	if err != nil {
		return err
	}
	rv, err := s.db.write(ctx, func(tx pgx.Tx, rv int64) error {
		tag, err := tx.Exec(ctx, `INSERT INTO charter_objects (key, rv, value) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING`, key, rv, data)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return storage.NewKeyExistsError(key, 0)
		}
		_, err = tx.Exec(ctx, `INSERT INTO charter_events (rv, key, type, value) VALUES ($1, $2, 'ADDED', $3)`, rv, key, data)
		return err
	})
	if err != nil {
		return storageError(key, err)
	}
	if out != nil {
		return s.decode(data, out, rv)
	}
	return nil
}

// objState is an object as read from the table.
type objState struct {
	obj    runtime.Object
	data   []byte
	rv     int64
	exists bool
	// stale: read from a cached object the caller suggested, which may
	// be older than the table's.
	stale bool
}

// getState reads key into a new object of v's type. A missing key is
// NotFound unless ignoreNotFound, which gives the zero object.
func (s *Store) getState(ctx context.Context, key string, v reflect.Value, ignoreNotFound bool) (*objState, error) {
	st := &objState{obj: reflect.New(v.Type()).Interface().(runtime.Object)}
	err := s.db.pool.QueryRow(ctx, `SELECT rv, value FROM charter_objects WHERE key = $1`, key).Scan(&st.rv, &st.data)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if !ignoreNotFound {
			return nil, storage.NewKeyNotFoundError(key, 0)
		}
		if err := runtime.SetZeroValue(st.obj); err != nil {
			return nil, err
		}
		return st, nil
	case err != nil:
		return nil, storageError(key, err)
	}
	st.exists = true
	if err := s.decode(st.data, st.obj, st.rv); err != nil {
		return nil, storage.NewCorruptObjError(key, err)
	}
	return st, nil
}

// startWrite is the common start of Delete and GuaranteedUpdate: the
// checked key, the type of object out points to, and the state the write
// starts from, the suggested cached object's when there is one (it may be
// stale), else the stored one's.
func (s *Store) startWrite(ctx context.Context, key string, out, cachedExistingObject runtime.Object, ignoreNotFound bool) (string, reflect.Value, *objState, error) {
	key, err := s.prepareKey(key, false)
	if err != nil {
		return "", reflect.Value{}, nil, err
	}
	v, err := conversion.EnforcePtr(out)
	if err != nil {
		return "", reflect.Value{}, nil, fmt.Errorf("unable to convert output object to pointer: %w", err)
	}
	var st *objState
	if cachedExistingObject != nil {
		st, err = s.stateOf(cachedExistingObject)
	} else {
		st, err = s.getState(ctx, key, v, ignoreNotFound)
	}
	if err != nil {
		return "", reflect.Value{}, nil, err
	}
	return key, v, st, nil
}

// stateOf is the state a cached object suggests.
func (s *Store) stateOf(obj runtime.Object) (*objState, error) {
	rv, err := s.versioner.ObjectResourceVersion(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the resourceVersion of the suggested object: %w", err)
	}
	stored := obj.DeepCopyObject()
	if err := s.versioner.PrepareObjectForStorage(stored); err != nil {
		return nil, err
	}
	data, err := runtime.Encode(s.codec, stored)
	if err != nil {
		return nil, err
	}
	return &objState{obj: obj, data: data, rv: int64(rv), exists: true, stale: true}, nil
}

// Delete removes key, checking preconditions and validateDeletion against
// the object as it is at the time of the deletion (retrying when another
// write came between).
func (s *Store) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, _ storage.DeleteOptions) error {
	key, v, st, err := s.startWrite(ctx, key, out, cachedExistingObject, false)
	if err != nil {
		return err
	}
	for {
		if err := s.checkDeletion(ctx, key, st, preconditions, validateDeletion); err != nil {
			if !st.stale {
				return err
			}
			// The suggested object may be out of date: check the
			// current one, unless it is the same version.
			failed, cachedRV := err, st.rv
			if st, err = s.getState(ctx, key, v, false); err != nil {
				return err
			}
			if st.rv == cachedRV {
				return failed
			}
			continue
		}
		rv, err := s.db.write(ctx, func(tx pgx.Tx, rv int64) error {
			tag, err := tx.Exec(ctx, `DELETE FROM charter_objects WHERE key = $1 AND rv = $2`, key, st.rv)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return errConflict
			}
			_, err = tx.Exec(ctx, `INSERT INTO charter_events (rv, key, type, value, prev_rv) VALUES ($1, $2, 'DELETED', $3, $4)`, rv, key, st.data, st.rv)
			return err
		})
		if errors.Is(err, errConflict) {
			if st, err = s.getState(ctx, key, v, false); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return storageError(key, err)
		}
		return s.decode(st.data, out, rv)
	}
}

func (s *Store) checkDeletion(ctx context.Context, key string, st *objState, preconditions *storage.Preconditions, validateDeletion storage.ValidateObjectFunc) error {
	if preconditions != nil {
		if err := preconditions.Check(key, st.obj); err != nil {
			return err
		}
	}
	return validateDeletion(ctx, st.obj)
}

// Get reads key into objPtr.
func (s *Store) Get(ctx context.Context, key string, opts storage.GetOptions, objPtr runtime.Object) error {
	key, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	var (
		current int64
		rv      *int64
		data    []byte
	)
	err = s.db.pool.QueryRow(ctx, `SELECT r.current, o.rv, o.value FROM charter_revision r
		LEFT JOIN charter_objects o ON o.key = $1 WHERE r.id = 1`, key).Scan(&current, &rv, &data)
	if err != nil {
		return storageError(key, err)
	}
	if err := s.checkMinimumRV(opts.ResourceVersion, current); err != nil {
		return err
	}
	if rv == nil {
		if opts.IgnoreNotFound {
			return runtime.SetZeroValue(objPtr)
		}
		return storage.NewKeyNotFoundError(key, 0)
	}
	return s.decode(data, objPtr, *rv)
}

// checkMinimumRV fails a read that asks for a resourceVersion newer than
// the current one, as etcd3's store does.
func (s *Store) checkMinimumRV(minimum string, current int64) error {
	if minimum == "" {
		return nil
	}
	rv, err := s.versioner.ParseResourceVersion(minimum)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	if int64(rv) > current {
		return storage.NewTooLargeResourceVersionError(rv, uint64(current), 1)
	}
	return nil
}

// GuaranteedUpdate applies tryUpdate to the object at key until the write
// lands on the version tryUpdate saw.
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	key, v, st, err := s.startWrite(ctx, key, destination, cachedExistingObject, ignoreNotFound)
	if err != nil {
		return err
	}
	refresh := func() error {
		st, err = s.getState(ctx, key, v, ignoreNotFound)
		return err
	}
	// retryStale re-reads the object after failed, which a suggested
	// object may have caused by being out of date; it returns failed when
	// the object read is not newer.
	retryStale := func(failed error) error {
		if !st.stale {
			return failed
		}
		cachedRV := st.rv
		if err := refresh(); err != nil {
			return err
		}
		if st.rv == cachedRV {
			return failed
		}
		return nil
	}
	for {
		if preconditions != nil {
			if err := preconditions.Check(key, st.obj); err != nil {
				if err := retryStale(err); err != nil {
					return err
				}
				continue
			}
		}
		updated, _, err := tryUpdate(st.obj.DeepCopyObject(), storage.ResponseMeta{ResourceVersion: uint64(st.rv)})
		if err != nil {
			if err := retryStale(err); err != nil {
				return err
			}
			continue
		}
		if err := s.versioner.PrepareObjectForStorage(updated); err != nil {
			return fmt.Errorf("PrepareObjectForStorage failed: %w", err)
		}
		data, err := runtime.Encode(s.codec, updated)
		if err != nil {
			return err
		}
		if st.exists && bytes.Equal(data, st.data) {
			// Nothing changed: no write, no event, as etcd3's store.
			if st.stale {
				if err := refresh(); err != nil {
					return err
				}
				continue
			}
			return s.decode(st.data, destination, st.rv)
		}
		rv, err := s.db.write(ctx, func(tx pgx.Tx, rv int64) error {
			if !st.exists {
				tag, err := tx.Exec(ctx, `INSERT INTO charter_objects (key, rv, value) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING`, key, rv, data)
				if err != nil {
					return err
				}
				if tag.RowsAffected() == 0 {
					return errConflict
				}
				_, err = tx.Exec(ctx, `INSERT INTO charter_events (rv, key, type, value) VALUES ($1, $2, 'ADDED', $3)`, rv, key, data)
				return err
			}
			tag, err := tx.Exec(ctx, `UPDATE charter_objects SET rv = $3, value = $4 WHERE key = $1 AND rv = $2`, key, st.rv, rv, data)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return errConflict
			}
			_, err = tx.Exec(ctx, `INSERT INTO charter_events (rv, key, type, value, prev_value, prev_rv) VALUES ($1, $2, 'MODIFIED', $3, $4, $5)`,
				rv, key, data, st.data, st.rv)
			return err
		})
		if errors.Is(err, errConflict) {
			if err := refresh(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return storageError(key, err)
		}
		return s.decode(data, destination, rv)
	}
}

// GetList reads the object at key (opts.Recursive false) or the objects
// under it into listObj, those opts.Predicate selects, a page at a time
// when it sets a limit.
//
// A list at the current resourceVersion reads charter_objects. A list at
// an older one (an exact resourceVersion, or the pages after the first)
// reads the objects as they were then, as etcd does: those not written
// since, and for the others the value the first later event replaced
// (none if that event created the object). That needs every event after
// that resourceVersion, so one older than Compact kept gets 410 Gone, as
// from etcd after a compaction.
func (s *Store) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	key, err := s.prepareKey(key, opts.Recursive)
	if err != nil {
		return err
	}
	listPtr, err := meta.GetItemsPtr(listObj)
	if err != nil {
		return err
	}
	items, err := conversion.EnforcePtr(listPtr)
	if err != nil || items.Kind() != reflect.Slice {
		return fmt.Errorf("need ptr to slice: %v", err)
	}
	withRev, continueKey, err := storage.ValidateListOptions(key, s.versioner, opts)
	if err != nil {
		return err
	}
	tx, err := s.db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return storageError(key, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var current, compacted int64
	if err := tx.QueryRow(ctx, `SELECT current, compacted FROM charter_revision WHERE id = 1`).Scan(&current, &compacted); err != nil {
		return storageError(key, err)
	}
	listRV := current
	switch {
	case withRev > current:
		return storage.NewTooLargeResourceVersionError(uint64(withRev), uint64(current), 1)
	case withRev > 0 && withRev < compacted:
		return listExpired(continueKey, key)
	case withRev > 0:
		listRV = withRev
	default:
		if err := s.checkMinimumRV(opts.ResourceVersion, current); err != nil {
			return err
		}
	}

	r := keyRange{from: key, fromInclusive: true, to: key, toInclusive: true}
	if opts.Recursive {
		r = keyRange{from: key, fromInclusive: true, to: prefixEnd(key)}
		if continueKey != "" {
			// A continue key this store issued is the last key listed
			// and a NUL byte, which PostgreSQL's text cannot hold: the
			// keys after the last one.
			from, afterLast := strings.CutSuffix(continueKey, "\x00")
			if strings.ContainsRune(from, 0) || from < key {
				return apierrors.NewBadRequest("invalid continue token: its key is not one of this list's")
			}
			r.from, r.fromInclusive = from, !afterLast
		}
	}
	newItem := newItemFunc(items)
	limit := opts.Predicate.Limit
	paging := opts.Recursive && limit > 0
	var (
		lastKey string
		hasMore bool
		count   int64
	)
scan:
	for {
		// Built again for every chunk: after the first, the range starts
		// after the last key read (r.fromInclusive false), which an
		// inclusive bound would read twice.
		query := s.rangeQuery(r, listRV < current)
		rows, err := tx.Query(ctx, query+` ORDER BY key LIMIT $4`, r.from, r.to, listRV, listChunk)
		if err != nil {
			return storageError(key, err)
		}
		n := 0
		for rows.Next() {
			var (
				k    string
				rv   int64
				data []byte
			)
			if err := rows.Scan(&k, &rv, &data); err != nil {
				rows.Close()
				return storageError(key, err)
			}
			n++
			r.from, r.fromInclusive = k, false
			obj := newItem()
			if err := s.decode(data, obj, rv); err != nil {
				rows.Close()
				return storage.NewCorruptObjError(k, err)
			}
			if !opts.Predicate.Empty() {
				matches, err := opts.Predicate.Matches(obj)
				if err != nil {
					rows.Close()
					return err
				}
				if !matches {
					continue
				}
			}
			if paging && count == limit {
				hasMore = true
				rows.Close()
				break scan
			}
			items.Set(reflect.Append(items, reflect.ValueOf(obj).Elem()))
			count++
			lastKey = k
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return storageError(key, err)
		}
		if n < listChunk {
			break
		}
	}
	if items.IsNil() {
		// An empty list has [] items, not null, as from etcd3's store.
		items.Set(reflect.MakeSlice(items.Type(), 0, 0))
	}
	if !hasMore {
		return s.versioner.UpdateList(listObj, uint64(listRV), "", nil)
	}
	next, err := storage.EncodeContinue(lastKey+"\x00", key, listRV)
	if err != nil {
		return err
	}
	var remaining *int64
	if opts.Predicate.Empty() {
		rest := keyRange{from: lastKey, to: prefixEnd(key)}
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (`+s.rangeQuery(rest, listRV < current)+`) rest`, rest.from, rest.to, listRV).Scan(&n); err != nil {
			return storageError(key, err)
		}
		remaining = &n
	}
	return s.versioner.UpdateList(listObj, uint64(listRV), next, remaining)
}

// The messages of etcd3's store for a list at a compacted resourceVersion,
// which clients (client-go's pager, reflectors) and upstream tests read.
const (
	listExpiredMessage     = "The resourceVersion for the provided list is too old."
	continueExpiredMessage = "The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided " +
		"token results in an inconsistent list - objects that were created, " +
		"modified, or deleted between the time the first chunk was returned " +
		"and now may show up in the list."
)

// listExpired is the 410 Gone of a list at a resourceVersion older than the
// events kept. A continued list gets, as from etcd3's store, a token that
// continues it at the current resourceVersion (-1).
func listExpired(continueKey, keyPrefix string) error {
	if continueKey == "" {
		return apierrors.NewResourceExpired(listExpiredMessage)
	}
	status := apierrors.NewResourceExpired(continueExpiredMessage)
	if token, err := storage.EncodeContinue(continueKey, keyPrefix, -1); err == nil {
		status.ErrStatus.ListMeta.Continue = token
	}
	return status
}

// keyRange is the keys from from to to, each bound included or not.
type keyRange struct {
	from, to                   string
	fromInclusive, toInclusive bool
}

// cond is the SQL condition on column key of r, whose bounds are $1 and $2.
func (r keyRange) cond() string {
	low, high := ">", "<"
	if r.fromInclusive {
		low = ">="
	}
	if r.toInclusive {
		high = "<="
	}
	return "key " + low + " $1 AND key " + high + " $2"
}

// rangeQuery selects key, rv and value of the objects in r ($1, $2): the
// current ones, or with past those as of resourceVersion $3.
func (s *Store) rangeQuery(r keyRange, past bool) string {
	if !past {
		return `SELECT key, rv, value FROM charter_objects WHERE ` + r.cond() + ` AND $3::bigint IS NOT NULL`
	}
	return `SELECT key, rv, value FROM charter_objects WHERE ` + r.cond() + ` AND rv <= $3
		UNION ALL
		SELECT key, prev_rv, CASE WHEN type = 'DELETED' THEN value ELSE prev_value END FROM (
			SELECT DISTINCT ON (key) key, type, value, prev_value, prev_rv FROM charter_events
			WHERE ` + r.cond() + ` AND rv > $3 ORDER BY key, rv
		) first_after WHERE type <> 'ADDED'`
}

// newItemFunc makes the items of a list whose Items slice is v.
func newItemFunc(v reflect.Value) func() runtime.Object {
	elem := v.Type().Elem()
	return func() runtime.Object { return reflect.New(elem).Interface().(runtime.Object) }
}

// prefixEnd is the smallest key greater than every key starting with
// prefix, prefix's last byte incremented ("/a/" gives "/a0").
func prefixEnd(prefix string) string {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return string(end[:i+1])
		}
	}
	// All 0xff: no upper bound; no key is that large.
	return string(append([]byte(prefix), 0xff))
}

// Stats counts the resource's objects.
func (s *Store) Stats(ctx context.Context) (storage.Stats, error) {
	prefix, err := s.prepareKey(s.resourcePrefix, true)
	if err != nil {
		return storage.Stats{}, err
	}
	var n int64
	if err := s.db.pool.QueryRow(ctx, `SELECT count(*) FROM charter_objects WHERE key >= $1 AND key < $2`, prefix, prefixEnd(prefix)).Scan(&n); err != nil {
		return storage.Stats{}, err
	}
	return storage.Stats{ObjectCount: n}, nil
}

// ReadinessCheck pings the database.
func (s *Store) ReadinessCheck() error {
	ctx, cancel := context.WithTimeout(context.Background(), readinessTimeout)
	defer cancel()
	return s.db.pool.Ping(ctx)
}

// RequestWatchProgress is for the watch cache, which this storage is not
// used under: watches send bookmarks of their own.
func (s *Store) RequestWatchProgress(context.Context) error { return nil }

// GetCurrentResourceVersion is the resourceVersion of the newest write.
func (s *Store) GetCurrentResourceVersion(ctx context.Context) (uint64, error) {
	var current int64
	if err := s.db.pool.QueryRow(ctx, `SELECT current FROM charter_revision WHERE id = 1`).Scan(&current); err != nil {
		return 0, err
	}
	return uint64(current), nil
}

// EnableResourceSizeEstimation is not supported: Stats counts objects only.
func (s *Store) EnableResourceSizeEstimation(storage.KeysFunc) error { return nil }

// CompactRevision is the newest resourceVersion this process's Compact
// removed, or that the table recorded when it was opened.
func (s *Store) CompactRevision() int64 { return s.db.compacted.Load() }

// decode reads data into objPtr and sets its resourceVersion.
func (s *Store) decode(data []byte, objPtr runtime.Object, rv int64) error {
	if _, err := conversion.EnforcePtr(objPtr); err != nil {
		return fmt.Errorf("unable to convert output object to pointer: %w", err)
	}
	if _, _, err := s.codec.Decode(data, nil, objPtr); err != nil {
		return err
	}
	return s.versioner.UpdateObject(objPtr, uint64(rv))
}

// storageError keeps storage's and the API's own errors and names the
// reports database in any other (a 500 Internal Server Error for clients).
func storageError(key string, err error) error {
	var se *storage.StorageError
	if errors.As(err, &se) {
		return err
	}
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return fmt.Errorf("reports database, key %s: %w", key, err)
}

// readinessTimeout bounds ReadinessCheck's ping.
const readinessTimeout = 5 * time.Second
