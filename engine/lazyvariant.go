package engine

import "sync"

// lazyVariant is a CEL policy's autogen copy (its spec S rewritten for
// some Pod controllers), compiled into a V when a controller first comes
// to it: most sets never see one (the CLI compiles a set per suite), and
// its faults would repeat those of the policy, which compiled.
type lazyVariant[S, V any] struct {
	spec    *S
	path    string
	compile func(spec *S, path string, f *faults) *V
	once    sync.Once
	v       *V
	fault   string
}

func newLazyVariant[S, V any](spec *S, path string, compile func(*S, string, *faults) *V) *lazyVariant[S, V] {
	return &lazyVariant[S, V]{spec: spec, path: path, compile: compile}
}

// compiled returns the compiled copy, or why it did not compile.
func (l *lazyVariant[S, V]) compiled() (*V, string) {
	l.once.Do(func() {
		f := &faults{}
		v := l.compile(l.spec, l.path, f)
		if len(f.errs) > 0 || v == nil {
			l.fault = "autogen: " + f.errs.Error()
			return
		}
		l.v = v
	})
	return l.v, l.fault
}
