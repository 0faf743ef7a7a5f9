package reportsstore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/storage"
)

// TestConcurrentWritersWatchedInOrder: writers on separate connections
// commit concurrently; a watch from before them must see every write, each
// once, in increasing resourceVersion order. The revision row lock is what
// makes commit order resourceVersion order; without it a watch that read
// version N could miss a version N-1 committed after it.
func TestConcurrentWritersWatchedInOrder(t *testing.T) {
	ctx, s := podStore(t)
	start, err := s.GetCurrentResourceVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/pods/", storage.ListOptions{ResourceVersion: fmt.Sprint(start), Predicate: storage.Everything, Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	const writers, perWriter = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perWriter {
				pod := &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("w%d-%d", i, j)}}
				if err := s.Create(ctx, "/pods/ns/"+pod.Name, pod, nil, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	seen := map[string]bool{}
	last := start
	deadline := time.After(60 * time.Second)
	for len(seen) < writers*perWriter {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %d events", len(seen))
			}
			if e.Type != watch.Added {
				t.Fatalf("event %s %#v, want ADDED", e.Type, e.Object)
			}
			pod := e.Object.(*example.Pod)
			rv, err := s.versioner.ParseResourceVersion(pod.ResourceVersion)
			if err != nil {
				t.Fatal(err)
			}
			if rv <= last {
				t.Fatalf("%s at resourceVersion %d after %d: not increasing", pod.Name, rv, last)
			}
			last = rv
			if seen[pod.Name] {
				t.Fatalf("%s delivered twice", pod.Name)
			}
			seen[pod.Name] = true
		case <-deadline:
			t.Fatalf("watch delivered %d of %d creations", len(seen), writers*perWriter)
		}
	}
}

// TestCompactByAge: Compact removes the events older than its retention;
// a watch from before them then ends with 410 Gone, one from after them
// does not.
func TestCompactByAge(t *testing.T) {
	ctx, s := podStore(t)
	create := func(name string) *example.Pod {
		t.Helper()
		out := &example.Pod{}
		pod := &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if err := s.Create(ctx, "/pods/ns/"+name, pod, out, 0); err != nil {
			t.Fatal(err)
		}
		return out
	}
	old := create("old")
	// Age the first event rather than sleep past a retention.
	if _, err := s.db.pool.Exec(ctx, `UPDATE charter_events SET at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	recent := create("recent")
	removed, err := s.db.Compact(ctx, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustRV(t, old.ResourceVersion); removed != want {
		t.Fatalf("Compact removed through %d, want %d", removed, want)
	}
	if got := s.CompactRevision(); got != removed {
		t.Fatalf("CompactRevision() = %d after compacting through %d", got, removed)
	}

	tests := []struct {
		name string
		from string
		want func(watch.Event) error
	}{
		{name: "before the compacted event", from: fmt.Sprint(mustRV(t, old.ResourceVersion) - 1), want: func(e watch.Event) error {
			status, ok := e.Object.(*metav1.Status)
			if e.Type != watch.Error || !ok || status.Code != 410 {
				return fmt.Errorf("got %s %#v, want a 410 Gone error", e.Type, e.Object)
			}
			if !apierrors.IsResourceExpired(apierrors.FromObject(status)) {
				return fmt.Errorf("status %#v is not Expired", status)
			}
			return nil
		}},
		{name: "at the compacted event", from: old.ResourceVersion, want: func(e watch.Event) error {
			pod, ok := e.Object.(*example.Pod)
			if e.Type != watch.Added || !ok || pod.Name != recent.Name {
				return fmt.Errorf("got %s %#v, want ADDED %s", e.Type, e.Object, recent.Name)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := s.Watch(ctx, "/pods/", storage.ListOptions{ResourceVersion: tt.from, Predicate: storage.Everything, Recursive: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			select {
			case e := <-w.ResultChan():
				if err := tt.want(e); err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no event within 30s")
			}
		})
	}
}

func mustRV(t *testing.T, rv string) int64 {
	t.Helper()
	var v storage.APIObjectVersioner
	n, err := v.ParseResourceVersion(rv)
	if err != nil {
		t.Fatal(err)
	}
	return int64(n)
}

// TestListAcrossChunks: a list reads listChunk rows per query; one longer
// than a chunk holds every object once, now and at a past
// resourceVersion, in one page or in pages of listChunk+1.
func TestListAcrossChunks(t *testing.T) {
	ctx, s := podStore(t)
	const n = 2*listChunk + 3
	for i := range n {
		pod := &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("pod-%04d", i)}}
		if err := s.Create(ctx, "/pods/ns/"+pod.Name, pod, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	created, err := s.GetCurrentResourceVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A write after them makes a list at created read the past.
	later := &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-later"}}
	if err := s.Create(ctx, "/pods/ns/pod-later", later, nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		rv    string
		limit int64
		want  int
	}{
		{"now, one page", "", 0, n + 1},
		{"now, pages", "", listChunk + 1, n + 1},
		{"in the past, one page", fmt.Sprint(created), 0, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			opts := storage.ListOptions{ResourceVersion: tc.rv, Predicate: storage.Everything, Recursive: true}
			if tc.rv != "" {
				opts.ResourceVersionMatch = metav1.ResourceVersionMatchExact
			}
			opts.Predicate.Limit = tc.limit
			for pages := 0; ; pages++ {
				if pages > n {
					t.Fatal("the pages never end")
				}
				var list example.PodList
				if err := s.GetList(ctx, "/pods/", opts, &list); err != nil {
					t.Fatal(err)
				}
				for _, pod := range list.Items {
					if seen[pod.Name] {
						t.Fatalf("%s listed twice", pod.Name)
					}
					seen[pod.Name] = true
				}
				if list.Continue == "" {
					break
				}
				opts.Predicate.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = list.Continue, "", ""
			}
			if len(seen) != tc.want {
				t.Errorf("%d objects listed, want %d", len(seen), tc.want)
			}
		})
	}
}
