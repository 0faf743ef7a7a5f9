package jmespath

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	gojmespath "github.com/kyverno/go-jmespath"
)

// DefaultRegistry is the registry image_normalize prepends to references that
// name none, matching Kyverno's default configuration.
const DefaultRegistry = "docker.io"

// defaultCacheSize bounds the compile cache. Policies hold a finite set of
// expressions, but nested variables ({{ {{x}} }}) build new expressions from
// data, so the cache must not grow without limit.
const defaultCacheSize = 4096

// Interpreter evaluates JMESPath expressions with Kyverno's custom functions.
// It is safe for concurrent use. Create one with New and share it: compiled
// queries are cached by expression text.
type Interpreter struct {
	caller    *gojmespath.FunctionCaller
	functions []FunctionInfo
	env       *env

	cache     sync.Map // expression string -> *Query
	cached    atomic.Int64
	cacheSize int64
}

// env is what function handlers may depend on besides their arguments.
// Everything that touches the outside world (clock, DNS, randomness) is here so
// tests and the CLI can make evaluation hermetic.
type env struct {
	defaultRegistry string
	now             func() time.Time
	lookupIP        func(host string) ([]net.IP, error)
	randIntn        func(n int) int
}

// Option configures an Interpreter.
type Option func(*Interpreter)

// WithDefaultRegistry sets the registry image_normalize adds to image
// references without one (default "docker.io").
func WithDefaultRegistry(registry string) Option {
	return func(i *Interpreter) { i.env.defaultRegistry = registry }
}

// WithClock sets the clock used by time_now, time_now_utc and time_since
// (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(i *Interpreter) { i.env.now = now }
}

// WithLookupIP sets the resolver is_external_url uses for host names
// (default net.LookupIP). Kyverno resolves DNS here; tests and hermetic runs
// should inject a fake. nil disables resolution: host names are then an error.
func WithLookupIP(lookup func(host string) ([]net.IP, error)) Option {
	return func(i *Interpreter) { i.env.lookupIP = lookup }
}

// WithRandom sets the source of randomness for random(): intn(n) must return
// a value in [0, n). It must be safe for concurrent use.
func WithRandom(intn func(n int) int) Option {
	return func(i *Interpreter) { i.env.randIntn = intn }
}

// WithCacheSize bounds the number of compiled queries kept (default 4096).
// Zero or less disables caching.
func WithCacheSize(n int) Option {
	return func(i *Interpreter) { i.cacheSize = int64(n) }
}

// New returns an Interpreter with the JMESPath built-ins and all of Kyverno's
// custom functions registered. Custom functions replace built-ins of the same
// name (sum).
func New(opts ...Option) *Interpreter {
	i := &Interpreter{
		caller:    gojmespath.NewFunctionCaller(),
		cacheSize: defaultCacheSize,
		env: &env{
			defaultRegistry: DefaultRegistry,
			now:             time.Now,
			lookupIP:        net.LookupIP,
			randIntn:        defaultIntn,
		},
	}
	for _, opt := range opts {
		opt(i)
	}
	i.functions = builtinInfos()
	for _, f := range customFunctions(i.env) {
		i.caller.Register(f.entry())
		i.functions = append(i.functions, f.info())
	}
	return i
}

// Query is a compiled expression bound to the interpreter's functions.
// It is safe for concurrent use.
type Query struct {
	expr   string
	parsed *gojmespath.JMESPath
	opt    gojmespath.InterpreterOption
	// fast evaluates the query without the library when it can (fast.go);
	// nil when the query has nodes it does not cover.
	fast *fastNode
	// roots are the top-level entries of the data the query may read
	// (roots.go).
	roots rootReads
}

// Expression returns the source text of the query.
func (q *Query) Expression() string { return q.expr }

// Search evaluates the query against JSON-like data (map[string]any, []any,
// float64, string, bool, nil). Errors are returned as the library and the
// functions produce them, without the expression, so callers can add context
// the way Kyverno does ("JMESPath query failed: Unknown key \"x\" in path").
// Use IsNotFound to tell a missing map key from other failures.
func (q *Query) Search(data any) (out any, err error) {
	// Expressions and data come from users; a panic in the library or a
	// function must become a rule error, not crash the engine.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("JMESPath query %q panicked: %v", q.expr, r)
		}
	}()
	if q.fast != nil {
		scratch := scratchPool.Get().(*fastScratch)
		out, st := q.fast.eval(fastValue{v: data}, scratch)
		// What the scratch holds is cleared, and the result is never in
		// it: the lists it keeps serve the next query's intermediate
		// lists.
		scratchPool.Put(scratch)
		if st == fastOK {
			return out.value(), nil
		}
	}
	return q.parsed.Search(data, q.opt)
}

// scratchPool keeps fastScratches between queries, with the backing
// arrays of the intermediate lists the last query on it made: a Pod
// review's deny conditions and foreach lists made some 50 lists a
// review, most of them consumed by the node above.
var scratchPool = sync.Pool{New: func() any { return new(fastScratch) }}

// CompileError reports an expression that does not parse.
type CompileError struct {
	Expression string
	Err        error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("invalid JMESPath expression %q: %v", e.Expression, e.Err)
}

func (e *CompileError) Unwrap() error { return e.Err }

// Compile parses expr, or returns the cached query for it.
func (i *Interpreter) Compile(expr string) (*Query, error) {
	if v, ok := i.cache.Load(expr); ok {
		return v.(*Query), nil
	}
	parsed, err := compileGuarded(expr)
	if err != nil {
		return nil, &CompileError{Expression: expr, Err: err}
	}
	fast, roots := analyzeGuarded(expr)
	q := &Query{expr: expr, parsed: parsed, opt: gojmespath.WithFunctionCaller(i.caller), fast: fast, roots: roots}
	if i.cacheSize > 0 {
		if i.cached.Add(1) > i.cacheSize {
			// Crude but bounded: drop everything and start over. Policy
			// expressions are re-added on their next use.
			i.cache.Range(func(k, _ any) bool { i.cache.Delete(k); return true })
			i.cached.Store(1)
		}
		if prev, loaded := i.cache.LoadOrStore(expr, q); loaded {
			return prev.(*Query), nil
		}
	}
	return q, nil
}

// compileGuarded turns a parser panic into an error: expressions come from
// user policies and substituted data, and must never crash the engine.
func compileGuarded(expr string) (parsed *gojmespath.JMESPath, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parser panic: %v", r)
		}
	}()
	return gojmespath.Compile(expr)
}

// analyzeGuarded returns the fast form of an expression that parsed, or
// nil (see fastNode), and the top-level entries it may read. The library
// keeps its syntax tree to itself, so the expression is parsed a second
// time, once per compiled query.
func analyzeGuarded(expr string) (fast *fastNode, roots rootReads) {
	defer func() {
		if r := recover(); r != nil {
			fast, roots = nil, rootReads{all: true}
		}
	}()
	ast, err := gojmespath.NewParser().Parse(expr)
	if err != nil {
		return nil, rootReads{all: true}
	}
	return compileFast(ast), readsOfRoot(ast)
}

// MayReadRoot reports whether expr, evaluated against a map, may read its
// top-level entry key: false only when the expression certainly does not
// (see rootReads), so a document can leave out an entry that is costly to
// work out until a query needs it (jsoncontext.RootReader).
func (i *Interpreter) MayReadRoot(expr, key string) bool {
	q, err := i.Compile(expr)
	if err != nil {
		return true
	}
	return q.roots.mayRead(key)
}

// Search compiles (or reuses) expr and evaluates it against data.
func (i *Interpreter) Search(expr string, data any) (any, error) {
	q, err := i.Compile(expr)
	if err != nil {
		return nil, err
	}
	return q.Search(data)
}

// Functions lists every function an expression may call, built-ins first,
// then Kyverno's custom functions in the order of the spec.
func (i *Interpreter) Functions() []FunctionInfo {
	out := make([]FunctionInfo, len(i.functions))
	copy(out, i.functions)
	return out
}

// IsNotFound reports whether err (or an error it wraps) is Kyverno's
// "Unknown key" error raised for a missing map key on a bare path.
func IsNotFound(err error) bool {
	var nf gojmespath.NotFoundError
	return errors.As(err, &nf)
}
