package celruntime

import (
	"sync"

	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/fault"
)

// LazyVariant is a CEL policy's autogen copy (its spec S rewritten for
// some Pod controllers), compiled into a V when a controller first comes
// to it: most sets never see one (the CLI compiles a set per suite), and
// its faults would repeat those of the policy, which compiled.
type LazyVariant[S, V any] struct {
	spec    *S
	path    string
	compile func(spec *S, path string, f *fault.Collector) *V
	once    sync.Once
	v       *V
	fault   string
}

func newLazyVariant[S, V any](spec *S, path string, compile func(*S, string, *fault.Collector) *V) *LazyVariant[S, V] {
	return &LazyVariant[S, V]{spec: spec, path: path, compile: compile}
}

// Compiled returns the compiled copy, or why it did not compile.
func (l *LazyVariant[S, V]) Compiled() (*V, string) {
	l.once.Do(func() {
		f := &fault.Collector{}
		v := l.compile(l.spec, l.path, f)
		if len(f.Errs) > 0 || v == nil {
			l.fault = "autogen: " + f.Errs.Error()
			return
		}
		l.v = v
	})
	return l.v, l.fault
}

// AppendAutogenVariants appends to variants a variant V for each autogen
// copy: its matchConstraints compiled now, so the set knows which
// requests select it, and the rest deferred to a lazyVariant. A copy whose
// matchConstraints do not compile is a fault at its status.autogen path.
func AppendAutogenVariants[S, V any](variants []*V, copies []autogen.Copy[S],
	compile func(*S, string, *fault.Collector) *V, variant func(*Constraints, *LazyVariant[S, V]) *V, f *fault.Collector) []*V {
	for _, c := range copies {
		path := "status.autogen.configs." + c.Name + ".spec"
		m, err := CompileConstraints(c.Match)
		if err != nil {
			f.Add(path+".matchConstraints", err.Error())
			continue
		}
		variants = append(variants, variant(m, newLazyVariant(c.Spec, path, compile)))
	}
	return variants
}

// CompileVariants compiles a CEL policy's spec into its first variant
// and, when that has no fault, adds its autogen copies (copiesOf) as lazy
// variants (appendAutogenVariants). The faults are in f.
func CompileVariants[S, V any](spec *S, copiesOf func(*S) []autogen.Copy[S], compile func(*S, string, *fault.Collector) *V,
	variant func(*Constraints, *LazyVariant[S, V]) *V, f *fault.Collector) []*V {
	var variants []*V
	if v := compile(spec, "spec", f); v != nil {
		variants = append(variants, v)
	}
	if len(f.Errs) > 0 {
		return variants
	}
	return AppendAutogenVariants(variants, copiesOf(spec), compile, variant, f)
}
