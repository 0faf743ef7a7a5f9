package celruntime

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"weak"

	"github.com/charter-dev/charter/engine/fault"
)

// Cache holds compiled CEL policy parts still in use, by the part's type
// and its source. The caller owns it (the root's engine.CompileCache):
// the CLI keeps one for a run, which compiles the same policy into several
// sets (charter test compiles a set per distinct list of policy files,
// and suites share policies), and the cluster's policy cache one for the
// process, which compiles a policy again on each change. Without one,
// `make bench-cli` spent about a tenth more CPU (validate, cel and vpol
// lists, #32). Entries go when nothing holds the value any more, so
// neither a long run of edits in the cluster nor a CLI run over many
// suites keeps every policy ever compiled. A nil *Cache caches nothing.
// A Cache is safe for concurrent use; its zero value is empty.
type Cache struct {
	m sync.Map // cacheKey → weak.Pointer[T] of the key's part type T
}

// cacheKey tells apart parts of different types compiled from equal
// sources (a ValidatingPolicy's and an ImageValidatingPolicy's variant
// may share fields).
type cacheKey struct {
	part reflect.Type
	src  string
}

// Cached returns what compile made before in c from the same source
// (src's JSON is the key), or calls it. What compile adds faults for is
// not kept, so each compilation reports them; a source that does not
// encode is a fault at path. With a nil c it only calls compile. Every
// compiled CEL policy part goes through here: the variants of
// ValidatingPolicies, MutatingPolicies and ImageValidatingPolicies,
// validate.cel rules and webhook matchConditions.
func Cached[T any](c *Cache, src any, path string, f *fault.Collector, compile func() *T) *T {
	if c == nil {
		return compile()
	}
	b, err := json.Marshal(src)
	if err != nil {
		f.Add(path, err.Error())
		return nil
	}
	key := cacheKey{part: reflect.TypeFor[T](), src: string(b)}
	if wp, found := c.m.Load(key); found {
		if v := wp.(weak.Pointer[T]).Value(); v != nil {
			return v
		}
	}
	before := len(f.Errs)
	v := compile()
	if v != nil && len(f.Errs) == before {
		wp := weak.Make(v)
		c.m.Store(key, wp)
		runtime.AddCleanup(v, func(key cacheKey) { c.m.CompareAndDelete(key, wp) }, key)
	}
	return v
}

// Len returns how many entries c holds whose source contains substr (""
// counts every entry), the values collected but not yet cleaned up
// included: what tests of the cache look at.
func (c *Cache) Len(substr string) int {
	if c == nil {
		return 0
	}
	n := 0
	c.m.Range(func(k, _ any) bool {
		if strings.Contains(k.(cacheKey).src, substr) {
			n++
		}
		return true
	})
	return n
}
