// Package engine evaluates Kyverno policies against admission requests and
// existing resources: kyverno.io's ClusterPolicy and Policy, the
// policies.kyverno.io kinds (Validating, Mutating, Generating,
// ImageValidating and Deleting policies, cluster-wide and namespaced),
// and cleanup policies (engine/cleanup, apart from the PolicySet, as the
// cleanup controller runs them on a schedule). The root holds the
// PolicySet contract: it
// compiles each policy through the package of its kind (engine/cpol for
// ClusterPolicy and Policy, engine/vpol, mpol, gpol, ivpol, dpol for the
// CEL kinds), indexes them, dispatches a request to them and files their
// responses; the leaves under engine/ hold what needs none of it
// (docs/architecture.md lists them).
//
// The engine has two phases. Compile checks every policy once (unknown anchors
// and operators, malformed JMESPath, variables that background mode cannot
// resolve, rules with no match or several handlers), expands autogen rules
// for Pod controllers, pre-parses patterns, expressions and conditions, and
// indexes rules by kind and operation. The resulting PolicySet is immutable
// and safe for concurrent use: the CLI, the admission webhook and the report
// controllers all evaluate through it, so there is one code path for a
// verdict.
//
// Evaluation runs a shared rule pipeline for every rule type:
//
//	match/exclude → context entries → preconditions → exceptions → handler
//
// A rule that does not match produces no response at all. The handler is
// chosen per rule type: Validate runs validate rules, Mutate runs mutate
// rules (each on the previous rule's output, across policies, with one
// RFC 6902 patch of the whole change; mutate-existing rules on request),
// Generate returns the downstream objects generate rules want, and
// Evaluate runs mutation and then validation of the mutated object, as
// admission does.
//
// The engine is pure: it owns no clients and starts no goroutines. Anything
// it must look up (ConfigMaps, API calls, image registries, global context,
// namespace labels) comes through the small interfaces of engine/loader.
//
// # foreach
//
// validate, mutate and generate foreach entries share one element step
// (engine/cpol's foreach.go): each non-null element gets element,
// elementIndex and element<N>/elementIndex<N> (N the nesting depth, 0 outermost; the index
// is the element's position in the list, also when a mutate entry iterates
// in reverse), then the entry's context entries, then the Values hook's
// foreachValues for that index, then the entry's preconditions. A validate
// pattern checks the element when it is a map (unless elementScope is
// false), else the enclosing scope: the resource, or the outer element in
// a nested foreach.
//
// # kyverno test
//
// `charter test` (internal/clitest) is a caller like the others, with
// three hooks for Kyverno's CLI behaviour: WithValues (the values file:
// see Values for how keys, context entries and foreachValues apply),
// WithLoaders over the suite's cluster resources and mocked API calls, and
// WithCLIGeneration (skipped generate.foreach rules still generate). It
// compiles the same policy objects into several sets that are evaluated
// concurrently, which is why Compile never writes into the policies it is
// given (autogen rules are computed, never stored in status).
package engine

import (
	"context"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/unsupported"
)

// CompileOption configures Compile.
type CompileOption func(*compileConfig)

type compileConfig struct {
	exceptions    []*kyvernov2.PolicyException
	celExceptions []scopedCELException
	cache         *CompileCache
}

type scopedCELException struct {
	src   *policiesv1.PolicyException
	scope celruntime.ExceptionScope
}

// WithExceptions makes the PolicyExceptions part of the set: a rule they
// match is skipped with the exceptions attached. Exceptions are validated
// with the policies, and their errors are reported the same way.
func WithExceptions(exceptions []*kyvernov2.PolicyException) CompileOption {
	return func(c *compileConfig) { c.exceptions = append(c.exceptions, exceptions...) }
}

// EvalOption configures one evaluation.
type EvalOption func(*review.Options)

// WithMutationScan makes Validate answer for MutatingPolicies too, as
// Kyverno's background scan reports them (cel-policy-types.md §3.3.2): a
// policy that would still change the existing object fails with
// "mutation is not applied", one that would leave it as it is passes with
// "success"; matchConditions that do not hold skip it, exceptions and
// errors answer as at admission. Only the reports controller's scan
// wants this: at admission a MutatingPolicy mutates and never validates.
func WithMutationScan() EvalOption {
	return func(c *review.Options) { c.MutationScan = true }
}

// WithBackgroundChecks makes Generate, and Mutate under
// WithMutateExisting, decide only whether each generate and
// mutate-existing rule applies (Kyverno's ApplyBackgroundChecks,
// mutate-generate-semantics.md §8.2): a rule whose match and
// preconditions hold passes with no objects generated and no targets
// read. Admission uses it to decide which UpdateRequests to create; the
// background controller then does the work.
func WithBackgroundChecks() EvalOption {
	return func(c *review.Options) { c.BackgroundChecks = true }
}

// WithLoaders hands the evaluation what it needs to resolve context entries
// (configMap, apiCall, imageRegistry, globalReference) and namespace labels.
// A context entry whose loader is missing gives an error result.
func WithLoaders(l loader.Loaders) EvalOption {
	return func(c *review.Options) { c.Loaders = l }
}

// WithValues pins variables and context entries to fixed values, the way
// Kyverno's CLI values file does (see Values).
func WithValues(v review.Values) EvalOption {
	return func(c *review.Options) { c.Values = v }
}

// WithCLIGeneration makes Generate do what Kyverno's CLI does with a
// generate.foreach rule whose preconditions do not hold: the rule is still
// reported skipped ("preconditions not met"), but its objects are
// generated and attached to that response (mutate-generate-semantics.md
// §9.4, row 50). Kyverno's CLI runs the generator for every generate
// response, and only plain patterns re-check the rule's preconditions
// there. Only `charter test` wants this: admission and the background
// controller generate for passing rules only, so their GenerateResponse
// never carries objects on a skipped rule.
func WithCLIGeneration() EvalOption {
	return func(c *review.Options) { c.CLIGeneration = true }
}

func newEvalConfig(opts []EvalOption) review.Options {
	var c review.Options
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Validate evaluates the validate rules of every policy in the set that can
// match the request and returns one PolicyResponse per policy that produced
// at least one rule response, in the order the policies were compiled.
func (s *PolicySet) Validate(ctx context.Context, req *review.Request, opts ...EvalOption) *Response {
	cfg := newEvalConfig(opts)
	in := newRequestView(ctx, req, &cfg)
	resp := &Response{Resource: in.ResourceRef()}
	candidates := s.candidates(in)
	// Room for every candidate's response up front: appended one by one,
	// the responses of a Pod Security review would be copied five times
	// over (5 KiB of garbage where 1.2 KiB are kept).
	resp.Policies = make([]review.PolicyResponse, 0, len(candidates))
	s.rulesUpFront(in)
	for _, p := range candidates {
		if pr := p.validate(ctx, in, &cfg); len(pr.Rules) > 0 {
			resp.Policies = append(resp.Policies, pr)
		}
	}
	in.settleRequiredImages(resp, resp.Policies)
	return resp
}

// Policies returns the compiled policies of the set, in compile order.
func (s *PolicySet) Policies() []*Policy { return s.policies }

// Lookup returns the compiled policy with the given PolicyID (for a
// ClusterPolicy or Policy, its key: "name" or "namespace/name").
func (s *PolicySet) Lookup(id string) (*Policy, bool) {
	p, ok := s.byID[id]
	return p, ok
}

// Validate evaluates this policy's validate rules against the request. The
// response has no rules when none matched.
func (p *Policy) Validate(ctx context.Context, req *review.Request, opts ...EvalOption) review.PolicyResponse {
	cfg := newEvalConfig(opts)
	in := newRequestView(ctx, req, &cfg)
	if !p.cpol.ConditionsHold(&in.View) {
		return review.PolicyResponse{Policy: p.source, Key: p.key}
	}
	resp := p.validate(ctx, in, &cfg)
	in.settleRequiredImages(nil, []review.PolicyResponse{resp})
	return resp
}

// Unsupported returns the features of the policy that charter cannot run
// somewhere (see unsupported.Features); pick a place with In.
func (p *Policy) Unsupported() unsupported.List { return p.unsupported }

// Unsupported returns the unsupported features of every policy in the set.
func (s *PolicySet) Unsupported() unsupported.List {
	var out unsupported.List
	for _, p := range s.policies {
		out = append(out, p.unsupported...)
	}
	return out
}

// ReadsRoles reports whether the policy matches or excludes by roles or
// clusterRoles, or reads request.roles or request.clusterRoles: whether
// evaluating it needs the requester's roles resolved (Request.Roles and
// ClusterRoles). It is decided once, when the policy is compiled.
func (p *Policy) ReadsRoles() bool { return p.cpol.ReadsRoles() }

// Source returns the policy as it was compiled.
func (p *Policy) Source() kyvernov1.PolicyInterface { return p.source }

// Key returns the policy's PolicyKey, what users read: "name" for a
// cluster-wide policy, "namespace/name" for a namespaced one. Policies of
// different kinds may share it; see ID.
func (p *Policy) Key() string { return p.key }

// Rules returns the names of the policy's rules after autogen expansion, in
// evaluation order (each source rule followed by its autogen rules).
func (p *Policy) Rules() []string {
	return p.cpol.RuleNames()
}

// ID returns the policy's PolicyID.
func (p *Policy) ID() string { return p.id }

// WithWebhookConditionsMet tells the evaluation that the API server has
// already evaluated the policies' spec.webhookConfiguration.matchConditions
// (the request came through the policy's own webhook), so the engine does
// not evaluate them again. Admission passes it; without it a policy whose
// conditions do not hold for the request is left out.
func WithWebhookConditionsMet() EvalOption {
	return func(c *review.Options) { c.WebhookConditionsMet = true }
}
