package celruntime

import (
	"encoding/json"
	"runtime"
	"sync"
	"weak"

	"github.com/charter-dev/charter/engine/fault"
)

// WeakCache holds compiled values still in use, by source: the CLI
// compiles the same policy into several sets (charter test compiles a set
// per distinct list of policy files, and suites share policies), and in
// the cluster /policyvalidate compiles a policy object that the policy
// cache then compiles once for every controller of the process. Without
// it `make bench-cli` spent about a tenth more CPU (validate, cel and vpol
// lists, measured side by side when the controllers stopped compiling
// their own sets, #32), so it stays. Entries go when nothing holds the
// value any more, so neither a long run of edits in the cluster nor a CLI
// run over many suites keeps every policy ever compiled.
type WeakCache[T any] struct {
	M sync.Map // string → weak.Pointer[T]
}

// get returns the value compiled from key before, or compiles it. Only a
// value compiled without faults (ok) is kept: a faulty one must report its
// faults each time it is compiled.
func (c *WeakCache[T]) get(key string, compile func() (v *T, ok bool)) *T {
	if wp, found := c.M.Load(key); found {
		if v := wp.(weak.Pointer[T]).Value(); v != nil {
			return v
		}
	}
	v, ok := compile()
	if v != nil && ok {
		wp := weak.Make(v)
		c.M.Store(key, wp)
		runtime.AddCleanup(v, func(key string) { c.M.CompareAndDelete(key, wp) }, key)
	}
	return v
}

// Compile returns what compile made before from the same source (src's
// JSON is the key), or calls it. What compile adds faults for is not kept,
// so each compilation reports them; a source that does not encode is a
// fault at path. Every compiled CEL policy part goes through here: the
// variants of ValidatingPolicies, MutatingPolicies and
// ImageValidatingPolicies, and validate.cel rules.
func (c *WeakCache[T]) Compile(src any, path string, f *fault.Collector, compile func() *T) *T {
	key, err := json.Marshal(src)
	if err != nil {
		f.Add(path, err.Error())
		return nil
	}
	return c.get(string(key), func() (*T, bool) {
		before := len(f.Errs)
		v := compile()
		return v, len(f.Errs) == before
	})
}
