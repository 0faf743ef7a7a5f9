package policycache

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/params"
	"github.com/charter-dev/charter/engine/policyid"
)

// paramReader is an installed policy whose validate.cel rules read params,
// and the param kinds they read.
type paramReader struct {
	id     string
	policy kyvernov1.PolicyInterface
	kinds  []schema.GroupVersionKind
}

// paramReadersOf lists the policies that read params.
func paramReadersOf(policies []kyvernov1.PolicyInterface) []paramReader {
	var out []paramReader
	for _, p := range policies {
		if kinds := params.KindsOfPolicy(p); len(kinds) > 0 {
			out = append(out, paramReader{id: policyid.Of(p), policy: p, kinds: kinds})
		}
	}
	return out
}

// ParamChanged tells the cache that a param object changed (wire it to
// params.Informers.OnParamChange; obj is nil when unknown): each installed
// policy that may read it (params.Reads) counts one more param change,
// and the next rebuild, debounced with the policy changes, publishes a
// snapshot carrying the counts (Snapshot.ParamGeneration) to the
// subscribers, though no policy changed. An object no policy may read
// (most ConfigMaps, for a ConfigMap paramKind) publishes nothing. It
// does not block.
func (c *Cache) ParamChanged(gvk schema.GroupVersionKind, obj metav1.Object) {
	c.paramMu.Lock()
	counted := false
	for _, r := range c.paramReaders {
		if slices.Contains(r.kinds, gvk) && params.Reads(r.policy, gvk, obj) {
			if c.paramGens == nil {
				c.paramGens = map[string]uint64{}
			}
			c.paramGens[r.id]++
			counted = true
		}
	}
	c.paramsDirty = c.paramsDirty || counted
	c.paramMu.Unlock()
	if counted {
		c.poke()
	}
}

// readersInstalled makes the policies of a rebuild the ones ParamChanged
// asks; the counts of policies gone are dropped.
func (c *Cache) readersInstalled(policies []kyvernov1.PolicyInterface) {
	readers := paramReadersOf(policies)
	c.paramMu.Lock()
	defer c.paramMu.Unlock()
	c.paramReaders = readers
	maps.DeleteFunc(c.paramGens, func(id string, _ uint64) bool {
		return !slices.ContainsFunc(readers, func(r paramReader) bool { return r.id == id })
	})
}

// takeParams returns the param change counts for the next snapshot, and
// whether they changed since the last one taken.
func (c *Cache) takeParams() (map[string]uint64, bool) {
	c.paramMu.Lock()
	defer c.paramMu.Unlock()
	changed := c.paramsDirty
	c.paramsDirty = false
	return maps.Clone(c.paramGens), changed
}

// ParamGeneration counts the changes of the param objects the policy of
// id (policyid.Of) may read (params.Reads) that the cache was told of
// (Cache.ParamChanged) since it started: a controller that folds it into
// what it remembers of the policy sees such a change as a change of the
// policy. 0 for a policy that reads no params.
func (s *Snapshot) ParamGeneration(id string) uint64 {
	if s == nil {
		return 0
	}
	return s.params[id]
}
