package reports

import (
	"context"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/go-logr/logr"

	"github.com/charter-dev/charter/reconciler/reports/report"
)

// The admission writer learns whether a resource is stored from a watch
// of its kind's metadata, started with the first result of that kind,
// instead of asking the API server: a GET of the report and one of the
// object per resource and attempt were half a read per admission at
// 1,000 reviews a second of objects never stored (docs/scale.md), all of
// it the API server's time taken from admission. The watch keeps each
// object's name, namespace, UID and resourceVersion only.

// storedAnswer is what the writer knows of a resource being stored.
type storedAnswer uint8

const (
	// storedUnknown: the kind's watch has not synced yet; look again
	// later.
	storedUnknown storedAnswer = iota
	// storedAsk: the kind's watch cannot say (its list or watch was
	// refused, or failed before it synced): ask the API server.
	storedAsk
	storedYes
	storedNo
)

// objectWatches are the writer's metadata watches, one per kind, started
// on first use and run until the writer stops.
type objectWatches struct {
	meta metadata.Interface
	log  logr.Logger

	mu      sync.Mutex
	ctx     context.Context
	watches map[schema.GroupVersionResource]*objectWatch
	// answered counts the answers the watches gave (stored or not), for
	// the tests.
	answered atomic.Int64
}

// objectWatch is one kind's watch.
type objectWatch struct {
	informer cache.SharedIndexInformer
	// failed is set when listing or watching failed before the informer
	// synced: until it syncs, the writer asks the API server, as it did
	// without a watch.
	failed atomic.Bool
}

// start makes the watches run under ctx, the writer's life.
func (o *objectWatches) start(ctx context.Context) {
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
}

// of returns the watch of gvr, starting it on first use; nil before
// start.
func (o *objectWatches) of(gvr schema.GroupVersionResource) *objectWatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ctx == nil {
		return nil
	}
	if ow := o.watches[gvr]; ow != nil {
		return ow
	}
	ow := &objectWatch{informer: newMetadataInformer(o.meta, gvr, false)}
	log := o.log.WithValues("resource", gvr.String())
	_ = ow.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if !ow.informer.HasSynced() && !ow.failed.Swap(true) {
			if apierrors.IsForbidden(err) {
				log.Error(err, "admission reports cannot watch this kind: each resource's metadata is read instead; grant list and watch on it in a ClusterRole labelled rbac.charter.dev/aggregate-to-admission: \"true\"")
			} else {
				log.Error(err, "admission reports cannot watch this kind yet: each resource's metadata is read instead until the watch syncs")
			}
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	if o.watches == nil {
		o.watches = map[schema.GroupVersionResource]*objectWatch{}
	}
	o.watches[gvr] = ow
	go ow.informer.RunWithContext(o.ctx)
	return ow
}

// stored says whether the resource of scope (of kind gvr) is stored
// under its UID, as far as the kind's watch knows.
func (o *objectWatches) stored(gvr schema.GroupVersionResource, scope report.Scope) storedAnswer {
	ow := o.of(gvr)
	if ow == nil {
		return storedAsk
	}
	if !ow.informer.HasSynced() {
		if ow.failed.Load() {
			return storedAsk
		}
		return storedUnknown
	}
	o.answered.Add(1)
	obj, exists, err := ow.informer.GetStore().GetByKey(cache.ObjectName{Namespace: scope.Namespace, Name: scope.Name}.String())
	if err != nil || !exists {
		return storedNo
	}
	// Another UID: the request's object was never stored and the name
	// reused, or it was replaced since.
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok && m.UID == scope.UID {
		return storedYes
	}
	return storedNo
}
