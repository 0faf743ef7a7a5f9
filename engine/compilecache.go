package engine

import "github.com/charter-dev/charter/engine/celruntime"

// CompileCache holds the compiled parts of policies (the CEL kinds'
// variants, validate.cel rules, webhook matchConditions) still in use, by
// source, so that compiling the same policy again reuses them instead of
// type-checking every expression again. The caller owns it and hands it to
// Compile or NewCompiler with WithCompileCache: one for a CLI run, which
// compiles the same policies into several sets, one for the cluster's
// policy cache, which compiles a policy again on each change. Nothing in
// the engine caches across calls without it. An entry goes when no
// compiled policy holds it any more. A CompileCache is safe for
// concurrent use.
type CompileCache struct {
	parts celruntime.Cache
}

// NewCompileCache returns an empty CompileCache.
func NewCompileCache() *CompileCache { return &CompileCache{} }

// WithCompileCache makes Compile, or the Compiler NewCompiler returns,
// reuse what c holds and keep there what it compiles. Without it
// compiling is uncached: the same result, only slower when the same
// policy is compiled again.
func WithCompileCache(c *CompileCache) CompileOption {
	return func(cfg *compileConfig) { cfg.cache = c }
}

// kinds returns the cache the kinds' compilers take; nil caches nothing.
func (c *CompileCache) kinds() *celruntime.Cache {
	if c == nil {
		return nil
	}
	return &c.parts
}
