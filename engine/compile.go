package engine

import (
	"slices"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/celschema"
	"github.com/charter-dev/charter/engine/cpol"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/gpol"
	"github.com/charter-dev/charter/engine/ivpol"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/mpol"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/unsupported"
	"github.com/charter-dev/charter/engine/vpol"
)

// PolicySet is a compiled, immutable set of policies and exceptions. It is
// safe for concurrent use.
type PolicySet struct {
	policies []*Policy
	// byID indexes the policies by PolicyID.
	byID map[string]*Policy
	// env is what the kyverno.io rules of every policy share: the JMESPath
	// interpreter and the kyverno.io PolicyExceptions.
	env cpol.Env
	// celExceptions are the policies.kyverno.io PolicyExceptions.
	celExceptions []*celruntime.Exception
	// byKind indexes policies by the kinds their rules name, then by the
	// namespaces they can act in (candidates.go); wildcard holds the
	// policies with a rule whose kind selector has a wildcard kind.
	byKind   map[string]*kindIndex
	wildcard kindIndex
	// background are the policies with a generate or mutate-existing
	// rule (BackgroundPolicies).
	background []*Policy
	// webhookConditioned counts the policies with webhook matchConditions;
	// candidates checks them only when there are some.
	webhookConditioned int
	// cache is the caller's compile cache (WithCompileCache), read while
	// the set's policies compile; nil compiles uncached.
	cache *celruntime.Cache
}

// Policy is one compiled policy.
type Policy struct {
	set    *PolicySet
	source kyvernov1.PolicyInterface
	key    string
	// id is the PolicyID: the key is shared by policies of different
	// kinds and one name, the id is not.
	id string
	// unscored policies (policies.kyverno.io/scored: "false") report warn
	// instead of fail.
	unscored bool
	// background is true when a rule of the policy's kyverno.io spec (the
	// CEL kinds have one too: a GeneratingPolicy's generate rule) is a
	// generate or mutate-existing rule (BackgroundPolicies).
	background bool
	// order is the policy's position in the set.
	order int
	// kinds are the kind names (no group/version) the rules select; "*"
	// when a rule selects any kind.
	kinds []string
	// namespace is the namespace a namespaced policy (kyverno.io/v1
	// Policy) acts in, "" for a cluster-wide one. Every evaluation path
	// checks it through scopes: a namespaced policy sees only requests for
	// objects in its own namespace, never cluster-scoped ones.
	namespace string
	// unsupported are the features charter cannot run somewhere
	// (engine/unsupported).
	unsupported unsupported.List
	// vpol is set for a ValidatingPolicy or NamespacedValidatingPolicy,
	// which has no rules (engine/vpol).
	vpol *vpol.Policy
	// gpol is set for a GeneratingPolicy or NamespacedGeneratingPolicy,
	// whose one rule is evaluated from its CEL spec (engine/gpol).
	gpol *gpol.Policy
	// mpol is set for a MutatingPolicy or NamespacedMutatingPolicy, which
	// has no rules (engine/mpol).
	mpol *mpol.Policy
	// ivpol is set for an ImageValidatingPolicy or
	// NamespacedImageValidatingPolicy, which has no rules (engine/ivpol).
	ivpol *ivpol.Policy
	// cpol is set for a kyverno.io ClusterPolicy or Policy: its spec and
	// compiled rules (engine/cpol).
	cpol *cpol.Policy
}

// Compile checks and compiles the policies. It returns a set of every valid
// policy and, when some policy or exception is invalid, a fault.List
// listing every fault. Callers that need all-or-nothing (gitsync) treat any
// error as fatal; the CLI reports the invalid policies and runs the rest.
func Compile(policies []kyvernov1.PolicyInterface, opts ...CompileOption) (*PolicySet, error) {
	var cfg compileConfig
	for _, o := range opts {
		o(&cfg)
	}
	set := &PolicySet{
		byID:  make(map[string]*Policy, len(policies)),
		env:   cpol.Env{JP: jmespath.New()},
		cache: cfg.cache.kinds(),
	}
	var errs fault.List
	for _, src := range policies {
		p, perrs := set.compilePolicy(src)
		if len(perrs) > 0 {
			errs = append(errs, perrs...)
			continue
		}
		if _, dup := set.byID[p.id]; dup {
			errs = append(errs, &fault.Fault{Kind: src.GetKind(), Name: p.key, Fault: faultDuplicatePolicy})
			continue
		}
		set.policies = append(set.policies, p)
		set.byID[p.id] = p
		set.index(p)
	}
	rc := &cpol.Compiler{JP: set.env.JP, Cache: set.cache}
	for _, ex := range cfg.exceptions {
		e, eerrs := rc.CompileException(ex)
		if len(eerrs) > 0 {
			errs = append(errs, eerrs...)
			continue
		}
		set.env.Exceptions = append(set.env.Exceptions, e)
	}
	for _, ex := range cfg.celExceptions {
		e, eerrs := celruntime.CompileException(ex.src, ex.scope)
		if len(eerrs) > 0 {
			errs = append(errs, eerrs...)
			continue
		}
		set.celExceptions = append(set.celExceptions, e)
	}
	if len(errs) > 0 {
		return set, errs
	}
	return set, nil
}

// faultDuplicatePolicy is the fault of a policy left out of a set because
// one before it has the same PolicyID: the same kind, namespace and name.
// The API server never holds two such objects; the CLI, which reads
// files, can be handed two (and names both files).
const faultDuplicatePolicy = "duplicate policy"

func (s *PolicySet) compilePolicy(src kyvernov1.PolicyInterface) (*Policy, fault.List) {
	spec := src.GetSpec()
	p := &Policy{
		set:        s,
		background: spec != nil && slices.ContainsFunc(spec.Rules, cpol.IsBackgroundRule),
		source:     src,
		key:        policyid.Key(src),
		id:         policyid.Of(src),
		unscored:   src.GetAnnotations()[kyvernov1.AnnotationPolicyScored] == "false",
		namespace:  policyid.Namespace(src),
	}
	if errs := celschema.Faults(src, p.key); len(errs) > 0 {
		return nil, errs
	}
	if vp, ok := src.(policiesv1.ValidatingPolicyLike); ok {
		var errs fault.List
		if p.vpol, errs = vpol.Compile(vp, p.key, s.cache); len(errs) > 0 {
			return nil, errs
		}
		p.kinds = []string{"*"}
		return p, nil
	}
	if mp, ok := src.(policiesv1.MutatingPolicyLike); ok {
		var errs fault.List
		if p.mpol, errs = mpol.Compile(mp, p.key, s.cache); len(errs) > 0 {
			return nil, errs
		}
		p.kinds = []string{"*"}
		return p, nil
	}
	if ip, ok := src.(policiesv1.ImageValidatingPolicyLike); ok {
		var errs fault.List
		if p.ivpol, errs = ivpol.Compile(ip, p.key, s.cache); len(errs) > 0 {
			return nil, errs
		}
		p.kinds = []string{"*"}
		return p, nil
	}
	if gp, ok := src.(policiesv1.GeneratingPolicyLike); ok {
		var errs fault.List
		if p.gpol, errs = gpol.Compile(gp, p.key); len(errs) > 0 {
			return nil, errs
		}
		p.kinds = []string{"*"}
		return p, nil
	}
	cp, errs := cpol.Compile(src, p.key, s.env.JP, s.cache)
	if len(errs) > 0 {
		return nil, errs
	}
	p.cpol = cp
	p.kinds = cp.Kinds()
	p.unsupported = unsupported.Features(src)
	return p, nil
}
