package server

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/charter-dev/charter/engine"
)

// BackgroundRecord is an allowed, non-dry-run validating request and the
// policy sets it was validated against: the generate and mutate-existing
// rules of those sets that apply to it become UpdateRequests.
type BackgroundRecord struct {
	// UID is the admission request's UID.
	UID types.UID
	// Request is what was evaluated.
	Request *engine.Request
	// Sets are the policy sets of the webhook path that was called.
	Sets []*engine.PolicySet
	// FieldManager is the field manager the request's options name, "" if
	// none: the background controller's own writes carry
	// charter.BackgroundFieldManager.
	FieldManager string
}

// BackgroundSink takes admitted requests for the background controller
// (webhook/updaterequest.Generator). Admitted must never block the
// admission path: it reports false when it dropped the record.
type BackgroundSink interface {
	Admitted(rec BackgroundRecord) bool
}

func setsOf(scoped []scopedSet) []*engine.PolicySet {
	out := make([]*engine.PolicySet, 0, len(scoped))
	for _, s := range scoped {
		out = append(out, s.set)
	}
	return out
}
