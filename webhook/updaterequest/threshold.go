package updaterequest

import (
	"context"

	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// DefaultThreshold is Kyverno's updateRequestThreshold: no UpdateRequest is
// created while this many exist.
const DefaultThreshold = 1000

// Count counts the UpdateRequests of charter's namespace from a
// metadata-only informer, so that the threshold costs no request per
// create (Kyverno lists every UpdateRequest before each create).
type Count struct {
	informer cache.SharedIndexInformer
}

// NewCount returns a Count of the UpdateRequests in namespace; Run starts
// it.
func NewCount(md metadata.Interface, namespace string) *Count {
	gvr := kyvernov2.GroupVersion.WithResource("updaterequests")
	return &Count{informer: metadatainformer.NewFilteredMetadataInformer(md, gvr, namespace, 0, cache.Indexers{}, nil).Informer()}
}

// Run watches until ctx ends.
func (c *Count) Run(ctx context.Context) { c.informer.RunWithContext(ctx) }

// Pending returns how many UpdateRequests exist, and false until the
// first list is in.
func (c *Count) Pending() (int, bool) {
	if !c.informer.HasSynced() {
		return 0, false
	}
	return len(c.informer.GetStore().ListKeys()), true
}
