package engine

import (
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/cpol"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/unsupported"
)

// Compiler compiles policies and exceptions one at a time into reusable
// units, and assembles PolicySets from units. It is what a long-lived
// caller (the admission policy cache, the report controller) uses instead
// of Compile so that a change to one policy compiles that policy only:
// compiling is the expensive part (autogen, walking every string for
// variables, parsing patterns and JMESPath), while assembling a set from
// units that are already compiled is an index rebuild.
//
// Assemble(units of p₁…pₙ, units of e₁…eₘ) gives the same set, and the
// same errors, as Compile(p₁…pₙ, WithExceptions(e₁…eₘ)).
//
// Every set a Compiler assembles shares its JMESPath interpreter, whose
// query cache then stays warm from one set to the next. A Compiler is safe
// for concurrent use.
type Compiler struct {
	jp *jmespath.Interpreter
	// cache is the caller's compile cache (WithCompileCache); nil
	// compiles uncached.
	cache *celruntime.Cache
}

// NewCompiler returns a Compiler with its own JMESPath interpreter. Of
// the options it reads WithCompileCache only: exceptions are compiled one
// at a time too (Exception, CELException).
func NewCompiler(opts ...CompileOption) *Compiler {
	var cfg compileConfig
	for _, o := range opts {
		o(&cfg)
	}
	return &Compiler{jp: jmespath.New(), cache: cfg.cache.kinds()}
}

// CompiledPolicy is one policy compiled on its own, or the faults that kept
// it from compiling. It is immutable and may be assembled into any number
// of PolicySets, concurrently.
type CompiledPolicy struct {
	kind, key, id string
	source        kyvernov1.PolicyInterface
	// policy is the compiled policy, not bound to any set; nil when errs
	// is not empty. Assemble binds a shallow copy of it to each set: the
	// compiled rules are shared, only the set and the position differ.
	policy *Policy
	errs   fault.List
}

// Key returns the policy's PolicyKey: "name" for a cluster-wide policy,
// "namespace/name" for a namespaced one, whatever the kind.
func (u *CompiledPolicy) Key() string { return u.key }

// ID returns the policy's PolicyID, which tells apart policies of
// different kinds and one key.
func (u *CompiledPolicy) ID() string { return u.id }

// Source returns the policy the unit was compiled from.
func (u *CompiledPolicy) Source() kyvernov1.PolicyInterface { return u.source }

// Errors returns the policy's compile faults; a unit with faults is left
// out of every set it is assembled into.
func (u *CompiledPolicy) Errors() fault.List { return u.errs }

// Unsupported returns the features of the policy charter cannot run
// somewhere, as Policy.Unsupported; nil for a unit with faults.
func (u *CompiledPolicy) Unsupported() unsupported.List {
	if u.policy == nil {
		return nil
	}
	return u.policy.unsupported
}

// Policy compiles one policy: it validates it, expands its autogen rules
// and pre-parses its patterns and expressions. Faults are kept on the unit
// (see Errors), as Compile would report them.
func (c *Compiler) Policy(src kyvernov1.PolicyInterface) *CompiledPolicy {
	u := &CompiledPolicy{kind: src.GetKind(), key: policyid.Key(src), id: policyid.Of(src), source: src}
	p, errs := c.scratch().compilePolicy(src)
	if len(errs) > 0 {
		u.errs = errs
		return u
	}
	// The scratch set only lent its interpreter; the unit belongs to no
	// set until it is assembled.
	p.set = nil
	u.policy = p
	return u
}

// CompiledException is one PolicyException compiled on its own, or the
// faults that kept it from compiling. Like CompiledPolicy it is immutable
// and shareable. Exceptions are looked up when a rule is evaluated, so a
// changed exception needs no policy recompiled: assemble the same policy
// units with the new exception units.
type CompiledException struct {
	key    string
	source *kyvernov2.PolicyException
	ex     *cpol.Exception
	// celSource and celEx are set instead for a policies.kyverno.io
	// PolicyException.
	celSource *policiesv1.PolicyException
	celEx     *celruntime.Exception
	errs      fault.List
}

// Key returns "name" or "namespace/name".
func (u *CompiledException) Key() string { return u.key }

// Source returns the exception the unit was compiled from; nil for a
// policies.kyverno.io PolicyException (see CELSource).
func (u *CompiledException) Source() *kyvernov2.PolicyException { return u.source }

// CELSource returns the policies.kyverno.io PolicyException the unit was
// compiled from, nil for a kyverno.io one.
func (u *CompiledException) CELSource() *policiesv1.PolicyException { return u.celSource }

// Errors returns the exception's compile faults.
func (u *CompiledException) Errors() fault.List { return u.errs }

// Exception compiles one PolicyException.
func (c *Compiler) Exception(src *kyvernov2.PolicyException) *CompiledException {
	ex, errs := (&cpol.Compiler{JP: c.jp, Cache: c.cache}).CompileException(src)
	if len(errs) > 0 {
		key := src.Name
		if src.Namespace != "" {
			key = src.Namespace + "/" + src.Name
		}
		return &CompiledException{key: key, source: src, errs: errs}
	}
	return &CompiledException{key: ex.Key, source: src, ex: ex}
}

// CELException compiles one policies.kyverno.io PolicyException acting in
// scope.
func (c *Compiler) CELException(src *policiesv1.PolicyException, scope celruntime.ExceptionScope) *CompiledException {
	ex, errs := celruntime.CompileException(src, scope)
	key := src.Name
	if src.Namespace != "" {
		key = src.Namespace + "/" + src.Name
	}
	if len(errs) > 0 {
		return &CompiledException{key: key, celSource: src, errs: errs}
	}
	return &CompiledException{key: key, celSource: src, celEx: ex}
}

// Assemble builds a PolicySet from compiled units, in the order given,
// exactly as Compile builds one from the units' sources: the set holds
// every unit without faults (the first of two with the same ID), and the
// error, when not nil, is a fault.List listing the policies' faults in
// order, then duplicates, then the exceptions' faults. Nothing is
// compiled again.
func (c *Compiler) Assemble(policies []*CompiledPolicy, exceptions []*CompiledException) (*PolicySet, error) {
	set := c.scratch()
	var errs fault.List
	for _, u := range policies {
		if len(u.errs) > 0 {
			errs = append(errs, u.errs...)
			continue
		}
		if _, dup := set.byID[u.id]; dup {
			errs = append(errs, &fault.Fault{Kind: u.kind, Name: u.key, Fault: faultDuplicatePolicy})
			continue
		}
		p := new(Policy)
		*p = *u.policy
		p.set = set
		set.policies = append(set.policies, p)
		set.byID[p.id] = p
		set.index(p)
	}
	for _, u := range exceptions {
		if len(u.errs) > 0 {
			errs = append(errs, u.errs...)
			continue
		}
		if u.celEx != nil {
			set.celExceptions = append(set.celExceptions, u.celEx)
			continue
		}
		set.env.Exceptions = append(set.env.Exceptions, u.ex)
	}
	if len(errs) > 0 {
		return set, errs
	}
	return set, nil
}

// scratch returns an empty set on the compiler's interpreter, the same
// starting point Compile uses.
func (c *Compiler) scratch() *PolicySet {
	return &PolicySet{
		byID:  map[string]*Policy{},
		env:   cpol.Env{JP: c.jp},
		cache: c.cache,
	}
}
