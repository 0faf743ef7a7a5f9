package reportsstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
)

// pollInterval is how often a watch reads new events when no notification
// woke it: notifications can be lost when the listener reconnects.
const pollInterval = 2 * time.Second

// bookmarkInterval is how often a watch that allows bookmarks gets one
// when nothing it selects changed, so that it can resume from a recent
// resourceVersion rather than one Compact may have removed.
const bookmarkInterval = 10 * time.Second

// Watch streams the changes to key (or, with opts.Recursive, to the keys
// under it) that opts.Predicate selects, after opts.ResourceVersion. From
// resourceVersion "0" or "" (or with SendInitialEvents) it first sends the
// current objects as ADDED, as etcd3's store. A resourceVersion older than
// the events kept (Compact) gets 410 Gone.
func (s *Store) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	key, err := s.prepareKey(key, opts.Recursive)
	if err != nil {
		return nil, err
	}
	rv, err := s.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{
		store:     s,
		key:       key,
		recursive: opts.Recursive,
		pred:      opts.Predicate,
		result:    make(chan watch.Event, 100),
		cancel:    cancel,
	}
	var current, compacted int64
	if err := s.db.pool.QueryRow(ctx, `SELECT current, compacted FROM charter_revision WHERE id = 1`).Scan(&current, &compacted); err != nil {
		if ctx.Err() != nil {
			// The caller went away: an ended watch, not an error.
			cancel()
			close(w.result)
			return w, nil
		}
		cancel()
		return nil, storageError(key, err)
	}
	start := int64(rv)
	initialEvents := (opts.SendInitialEvents == nil && start == 0) || (opts.SendInitialEvents != nil && *opts.SendInitialEvents)
	switch {
	case start > current && initialEvents:
		cancel()
		return nil, storage.NewTooLargeResourceVersionError(uint64(start), uint64(current), 1)
	case start == 0 && !initialEvents:
		// sendInitialEvents=false with no resourceVersion: from now on.
		start = current
	}
	endBookmark := opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.Predicate.AllowWatchBookmarks
	// A start older than the events kept ends the watch with 410 Gone
	// once it is running (sendSince), as etcd3's store does.
	go w.run(ctx, start, initialEvents, endBookmark)
	return w, nil
}

func tooOld(rv, compacted int64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, compacted))
}

type watcher struct {
	store     *Store
	key       string
	recursive bool
	pred      storage.SelectionPredicate
	result    chan watch.Event
	cancel    context.CancelFunc
}

func (w *watcher) Stop()                          { w.cancel() }
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// send delivers e unless the watch was stopped.
func (w *watcher) send(ctx context.Context, e watch.Event) bool {
	select {
	case w.result <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *watcher) sendError(ctx context.Context, err error) {
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	w.send(ctx, watch.Event{Type: watch.Error, Object: &st})
}

func (w *watcher) run(ctx context.Context, last int64, initialEvents, endBookmark bool) {
	defer close(w.result)
	defer w.cancel()
	// API priority and fairness holds the watch request's seat until the
	// watch says it is initialised: once the initial events are out (or
	// failed), as etcd3's store says it.
	initialized := false
	defer func() {
		if !initialized {
			utilflowcontrol.WatchInitialized(ctx)
		}
	}()
	if initialEvents {
		rv, ok := w.sendInitial(ctx)
		if !ok {
			return
		}
		last = rv
		if endBookmark {
			if !w.sendBookmark(ctx, last, true) {
				return
			}
		}
	}
	utilflowcontrol.WatchInitialized(ctx)
	initialized = true
	lastBookmark := time.Now()
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	for {
		// Take the wake-up channel before reading, so that a write
		// committed after the read wakes this watch.
		wake := w.store.db.wake.next()
		for {
			next, sent, more, err := w.sendSince(ctx, last)
			if err != nil {
				if ctx.Err() == nil {
					w.sendError(ctx, err)
				}
				return
			}
			if sent {
				lastBookmark = time.Now()
			}
			last = next
			if !more {
				break
			}
		}
		if w.pred.AllowWatchBookmarks && time.Since(lastBookmark) >= bookmarkInterval {
			if !w.sendBookmark(ctx, last, false) {
				return
			}
			lastBookmark = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-poll.C:
		}
	}
}

// sendInitial sends the objects the watch selects as ADDED and returns the
// resourceVersion they were read at.
func (w *watcher) sendInitial(ctx context.Context) (int64, bool) {
	list := w.store.newListFunc()
	opts := storage.ListOptions{Predicate: w.pred, Recursive: w.recursive}
	opts.Predicate.Limit, opts.Predicate.Continue = 0, ""
	if err := w.store.GetList(ctx, w.key, opts, list); err != nil {
		if ctx.Err() == nil {
			w.sendError(ctx, err)
		}
		return 0, false
	}
	rv, err := w.store.versioner.ParseResourceVersion(mustListRV(list))
	if err != nil {
		w.sendError(ctx, err)
		return 0, false
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		w.sendError(ctx, err)
		return 0, false
	}
	for _, obj := range items {
		if !w.send(ctx, watch.Event{Type: watch.Added, Object: obj}) {
			return 0, false
		}
	}
	return int64(rv), true
}

func mustListRV(list runtime.Object) string {
	if l, err := meta.ListAccessor(list); err == nil {
		return l.GetResourceVersion()
	}
	return ""
}

func (w *watcher) sendBookmark(ctx context.Context, rv int64, initialEventsEnd bool) bool {
	obj := w.store.newFunc()
	if err := w.store.versioner.UpdateObject(obj, uint64(rv)); err != nil {
		w.sendError(ctx, err)
		return false
	}
	if initialEventsEnd {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
	}
	return w.send(ctx, watch.Event{Type: watch.Bookmark, Object: obj})
}

// sendSince sends the selected events after rv, at most listChunk of them
// read, and returns the resourceVersion it has read up to, whether it sent
// any event, and whether more events may follow at once.
func (w *watcher) sendSince(ctx context.Context, rv int64) (next int64, sent, more bool, err error) {
	tx, err := w.store.db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return rv, false, false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var current, compacted int64
	if err := tx.QueryRow(ctx, `SELECT current, compacted FROM charter_revision WHERE id = 1`).Scan(&current, &compacted); err != nil {
		return rv, false, false, err
	}
	if rv < compacted {
		return rv, false, false, tooOld(rv, compacted)
	}
	if current <= rv {
		return rv, false, false, nil
	}
	var rows pgx.Rows
	if w.recursive {
		rows, err = tx.Query(ctx, `SELECT rv, type, value, prev_value FROM charter_events
			WHERE rv > $1 AND key >= $2 AND key < $3 ORDER BY rv LIMIT $4`, rv, w.key, prefixEnd(w.key), listChunk)
	} else {
		rows, err = tx.Query(ctx, `SELECT rv, type, value, prev_value FROM charter_events
			WHERE rv > $1 AND key = $2 ORDER BY rv LIMIT $3`, rv, w.key, listChunk)
	}
	if err != nil {
		return rv, false, false, err
	}
	type row struct {
		rv        int64
		typ       string
		value     []byte
		prevValue []byte
	}
	var read []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.rv, &r.typ, &r.value, &r.prevValue); err != nil {
			rows.Close()
			return rv, false, false, err
		}
		read = append(read, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rv, false, false, err
	}
	_ = tx.Rollback(ctx)
	for _, r := range read {
		e, ok, err := w.event(r.rv, r.typ, r.value, r.prevValue)
		if err != nil {
			return rv, sent, false, err
		}
		if ok {
			if !w.send(ctx, e) {
				return rv, sent, false, ctx.Err()
			}
			sent = true
		}
		rv = r.rv
	}
	if len(read) == listChunk {
		return rv, sent, true, nil
	}
	// Every event up to current was read: none selected remains.
	return current, sent, false, nil
}

// event turns a stored event into the watch event the predicate makes of
// it: an update that makes an object selected is ADDED, one that makes it
// unselected is DELETED (of the old object), as etcd3's watch does. Old
// objects carry the event's resourceVersion.
func (w *watcher) event(rv int64, typ string, value, prevValue []byte) (watch.Event, bool, error) {
	decode := func(data []byte) (runtime.Object, error) {
		obj := w.store.newFunc()
		if err := w.store.decode(data, obj, rv); err != nil {
			return nil, err
		}
		return obj, nil
	}
	matches := func(obj runtime.Object) (bool, error) {
		if w.pred.Empty() {
			return true, nil
		}
		return w.pred.Matches(obj)
	}
	obj, err := decode(value)
	if err != nil {
		return watch.Event{}, false, err
	}
	ok, err := matches(obj)
	if err != nil {
		return watch.Event{}, false, err
	}
	switch typ {
	case string(watch.Added), string(watch.Deleted):
		return watch.Event{Type: watch.EventType(typ), Object: obj}, ok, nil
	}
	var prev runtime.Object
	prevOK := false
	if prevValue != nil {
		if prev, err = decode(prevValue); err != nil {
			return watch.Event{}, false, err
		}
		if prevOK, err = matches(prev); err != nil {
			return watch.Event{}, false, err
		}
	}
	switch {
	case ok && prevOK:
		return watch.Event{Type: watch.Modified, Object: obj}, true, nil
	case ok:
		return watch.Event{Type: watch.Added, Object: obj}, true, nil
	case prevOK:
		return watch.Event{Type: watch.Deleted, Object: prev}, true, nil
	}
	return watch.Event{}, false, nil
}
