package cpol

import (
	"context"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// Run evaluates kyverno.io context entries and conditions without
// a policy or a request: what a cleanup policy (kyverno.io/v2
// CleanupPolicy, ClusterCleanupPolicy) runs, its context once per run and
// its conditions once per object. A namespaced run's reads (configMap
// entries, apiCall urlPaths) are confined to its namespace as a
// namespaced policy's are (readScope): a tenant's CleanupPolicy reads
// nothing of another namespace. It is the only part of the rule pipeline
// the cleanup kinds use; a cleanup policy refuses the entries that need a
// request (imageRegistry) when it compiles.
type Run struct {
	ev  evaluation
	cfg review.Options
}

// NewRun starts a run whose entries read through loaders and
// compile their JMESPath with jp; namespace is the namespace a namespaced
// policy's reads are confined to, "" for a cluster-wide policy.
func NewRun(jp *jmespath.Interpreter, loaders loader.Loaders, namespace string) *Run {
	r := &Run{cfg: review.Options{Loaders: loaders}}
	r.ev = evaluation{env: &Env{JP: jp}, cfg: &r.cfg, namespace: namespace}
	return r
}

// LoadContext evaluates the entries in order and stores each result in
// doc under its name; later entries see earlier ones. The error names
// the entry.
func (r *Run) LoadContext(ctx context.Context, doc *jsoncontext.Document, entries []kyvernov1.ContextEntry) error {
	return r.ev.loadContext(ctx, doc, nil, entries)
}

// Conditions evaluates an any/all block of conditions over doc (nil
// holds). A variable that cannot be resolved is an error naming it.
func (r *Run) Conditions(doc *jsoncontext.Document, block *ConditionBlock) (bool, error) {
	ok, _, err := r.ev.conditions(doc, block)
	return ok, err
}
