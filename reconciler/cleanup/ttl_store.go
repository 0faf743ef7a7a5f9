package cleanup

import (
	"context"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/charter-dev/charter/engine/ttl"
)

// ttlEntry is what the TTL controller keeps of one labelled object: a
// few words instead of the object's metadata, so 100,000 tracked objects
// fit in little memory.
type ttlEntry struct {
	uid         types.UID
	value       string // the label's value
	created     metav1.Time
	propagation string // cleanup.kyverno.io/propagation-policy
	deleting    bool   // deletionTimestamp set
}

func entryOf(m *metav1.PartialObjectMetadata) (string, ttlEntry) {
	key := m.Name
	if m.Namespace != "" {
		key = m.Namespace + "/" + m.Name
	}
	return key, ttlEntry{uid: m.UID, value: m.Labels[ttl.Label], created: m.CreationTimestamp,
		propagation: m.Annotations[ttl.PropagationAnnotation], deleting: m.DeletionTimestamp != nil}
}

// splitKey returns the namespace and name of a store key.
func splitKey(key string) (namespace, name string) {
	if ns, n, ok := strings.Cut(key, "/"); ok {
		return ns, n
	}
	return "", key
}

// ttlStore is the reflector's store for one watched type: it keeps a
// ttlEntry per labelled object and tells changed about every object that
// is new or whose label, identity or deletion changed. It is fed by a
// reflector (not an informer), which keeps no copy of the objects.
type ttlStore struct {
	changed func(key string)
	removed func(uid types.UID)
	tracked prometheus.Gauge

	mu    sync.Mutex
	items map[string]ttlEntry
	// listed is what the last list found, until the reflector's Replace
	// swaps it in (see listWatch).
	listed map[string]ttlEntry
}

var _ cache.ReflectorStore = (*ttlStore)(nil)

func (s *ttlStore) get(key string) (ttlEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[key]
	return e, ok
}

func (s *ttlStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// Add and Update record the object.
func (s *ttlStore) Add(obj any) error    { s.put(obj); return nil }
func (s *ttlStore) Update(obj any) error { s.put(obj); return nil }

func (s *ttlStore) put(obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	key, e := entryOf(m)
	s.mu.Lock()
	old, had := s.items[key]
	s.items[key] = e
	s.mu.Unlock()
	if !had {
		s.tracked.Inc()
	}
	if !had || old != e {
		s.changed(key)
	}
}

// Delete forgets the object.
func (s *ttlStore) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil
	}
	key, _ := entryOf(m)
	s.mu.Lock()
	old, had := s.items[key]
	delete(s.items, key)
	s.mu.Unlock()
	if had {
		s.tracked.Dec()
		s.removed(old.uid)
	}
	return nil
}

// Replace takes what the last list found (or list, when the reflector
// hands objects over itself).
func (s *ttlStore) Replace(list []any, _ string) error {
	s.mu.Lock()
	fresh := s.listed
	s.listed = nil
	if fresh == nil {
		fresh = make(map[string]ttlEntry, len(list))
	}
	for _, obj := range list {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			key, e := entryOf(m)
			fresh[key] = e
		}
	}
	old := s.items
	s.items = fresh
	s.mu.Unlock()
	var changed []string
	for key, e := range fresh {
		if o, had := old[key]; !had || o != e {
			changed = append(changed, key)
		}
	}
	for key, o := range old {
		if _, still := fresh[key]; !still {
			s.removed(o.uid)
		}
	}
	s.tracked.Add(float64(len(fresh) - len(old)))
	for _, key := range changed {
		s.changed(key)
	}
	return nil
}

// Resync does nothing: deadlines wait in the queue.
func (s *ttlStore) Resync() error { return nil }

// forget drops every entry, when the type is no longer watched.
func (s *ttlStore) forget() {
	s.mu.Lock()
	n := len(s.items)
	s.items = map[string]ttlEntry{}
	s.mu.Unlock()
	s.tracked.Sub(float64(n))
}

// listWatch lists and watches the objects of gvr that carry the TTL
// label. The list pages through them 500 at a time into the store's
// listed map and hands the reflector an empty list at the snapshot's
// resourceVersion, so that no full list of objects is ever held in
// memory; Replace then swaps the map in. It opts out of watch-list
// streaming, which would gather every object in the reflector first.
func (s *ttlStore) listWatch(meta metadata.Interface, gvr schema.GroupVersionResource) cache.ListerWatcher {
	return noWatchList{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			// A consistent, paged read: ResourceVersion "0" would let
			// the API server answer with every object at once.
			opts := metav1.ListOptions{LabelSelector: ttl.Label, Limit: 500}
			listed := map[string]ttlEntry{}
			rv := ""
			for {
				page, err := meta.Resource(gvr).List(ctx, opts)
				if err != nil {
					return nil, err
				}
				if rv == "" {
					rv = page.ResourceVersion
				}
				for i := range page.Items {
					key, e := entryOf(&page.Items[i])
					listed[key] = e
				}
				if page.Continue == "" {
					break
				}
				opts.Continue = page.Continue
			}
			s.mu.Lock()
			s.listed = listed
			s.mu.Unlock()
			return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = ttl.Label
			return meta.Resource(gvr).Watch(ctx, opts)
		},
	}}
}

// noWatchList tells the reflector not to use watch-list streaming.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }
