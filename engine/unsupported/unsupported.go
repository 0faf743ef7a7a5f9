// Package unsupported is charter's one table of the policy features it
// does not run yet, and where (the cluster, the CLI or both): Features
// lists the findings on a policy, each naming the field and whether its
// rule enforces. Policy admission (/policyvalidate), policy status, the
// GitOps pre-apply check, the CLI and the engine's compile all read it.
// It is a leaf of engine/.
package unsupported

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/policyid"
)

// Where says where charter cannot run a feature yet.
type Where uint8

const (
	// InCluster is `charter serve`: the admission webhook and the
	// controllers (reports, and those still to come).
	InCluster Where = 1 << iota
	// InCLI is `charter test` and `charter apply`.
	InCLI
	// Everywhere is both.
	Everywhere = InCluster | InCLI
)

func (w Where) String() string {
	switch w {
	case InCluster:
		return "in the cluster"
	case InCLI:
		return "in the CLI"
	}
	return "anywhere"
}

// feature is one entry of unsupportedFeatures.
type feature struct {
	// name is what the user reads: "verifyImages".
	name string
	// kinds are the policy kinds the entry is about.
	kinds []string
	// path is the field path pattern, from the object's root: "[*]" is any
	// list index, "**." any run of fields (foreach nesting, mutate
	// targets, ...). A field that holds user content (patterns, generate
	// data, conditions, variable values) is never looked into, so a
	// resource field that happens to be called "context" is no feature.
	path string
	// where charter cannot run it.
	where Where
	// when, if set, must also hold of the field's value and its rule (the
	// rule's JSON; nil outside spec.rules).
	when func(value any, rule map[string]any) bool
}

// kyvernoPolicies are the kinds whose spec is a kyvernov1.Spec.
var kyvernoPolicies = []string{"ClusterPolicy", "Policy"}

// unsupportedFeatures is every policy feature charter does not run end to
// end, and where. It is the only such list: policy admission
// (/policyvalidate), policy status, the GitOps pre-apply check and the CLI
// all read it through Features.
//
// Whoever makes a feature work removes its line here (or narrows its
// where from Everywhere to InCluster when only the CLI gained it) in the
// change that makes it work: removing an entry is a one-line change (plus
// the want lines of testdata/policies.yaml that name it, and its row in the
// docs/policies.md's "What charter cannot run yet").
//
// Fields that only tune a feature listed here are not listed on their own
// (spec.generateExisting, spec.mutateExistingOnPolicyUpdate,
// spec.useServerSideApply, generate.synchronize, imageRegistryCredentials,
// ...): a policy using them also uses the feature, which is refused.
var unsupportedFeatures = []feature{
	// cleanup (#16): the cleanup controller runs them in the cluster;
	// the CLI skips these kinds.
	{name: "ClusterCleanupPolicy", kinds: []string{"ClusterCleanupPolicy"}, path: "spec", where: InCLI},
	{name: "CleanupPolicy", kinds: []string{"CleanupPolicy"}, path: "spec", where: InCLI},
	// Nobody yet.
	{name: "validate.assert", kinds: kyvernoPolicies, path: "spec.rules[*].validate.assert", where: Everywhere},
	// The CEL authorizer is bound at admission, to the requesting user
	// (the engine's celauthz.go); the CLI has no authorizer (nor a user) to answer it.
	{name: "the CEL authorizer", kinds: kyvernoPolicies, path: "spec.rules[*].**.expression", where: InCLI, when: usesCELAuthorizer},
}

// Finding is one feature of a policy that charter cannot run
// somewhere.
type Finding struct {
	// Kind and Name name the policy as fault.Fault does.
	Kind, Name string
	// Field is where the feature is used, e.g. spec.rules[0].validate.assert.
	Field string
	// Feature names it, e.g. "validate.assert".
	Feature string
	// Where charter cannot run it.
	Where Where
	// Enforce is true when the feature's rule may deny or change a request
	// or resource (see Features); false when it can only audit.
	Enforce bool
}

// In reports whether the feature cannot run at w.
func (u *Finding) In(w Where) bool { return u.Where&w != 0 }

// Message is the finding without the policy's name, as a policy's own
// status shows it: "spec.rules[0].validate.assert: validate.assert is not
// supported by charter in the cluster yet".
func (u *Finding) Message() string { return u.Field + ": " + u.Fault() }

// Fault says what is not supported, without the field: "verifyImages is
// not supported by charter in the cluster yet".
func (u *Finding) Fault() string {
	return fmt.Sprintf("%s is not supported by charter %s yet", u.Feature, u.Where)
}

func (u *Finding) Error() string { return fmt.Sprintf("%s %q: %s", u.Kind, u.Name, u.Message()) }

// List is the findings on one or more policies.
type List []*Finding

// In returns the findings that cannot run at w.
func (l List) In(w Where) List {
	var out List
	for _, u := range l {
		if u.In(w) {
			out = append(out, u)
		}
	}
	return out
}

// Enforced returns the findings whose rules may deny or change something.
func (l List) Enforced() List {
	var out List
	for _, u := range l {
		if u.Enforce {
			out = append(out, u)
		}
	}
	return out
}

// Messages joins the findings' messages with "; ".
func (l List) Messages() string {
	msgs := make([]string, len(l))
	for i, u := range l {
		msgs[i] = u.Message()
	}
	return strings.Join(msgs, "; ")
}

func (l List) Error() string {
	msgs := make([]string, len(l))
	for i, u := range l {
		msgs[i] = u.Error()
	}
	return strings.Join(msgs, "\n")
}

// Features returns every entry of charter's unsupported-feature
// table that obj uses, wherever charter cannot run it; callers pick theirs
// with In. obj is a ClusterPolicy or Policy (kyvernov1.PolicyInterface), a
// ClusterCleanupPolicy or a CleanupPolicy; other objects have none.
//
// Enforce says whether refusing the policy is called for:
//   - a validate or verifyImages rule enforces when its failure action
//     can resolve to Enforce in some namespace: the rule's or the
//     policy's action or one of their overrides says Enforce, or the
//     policy is staged (charter.dev/staged), which a namespace label can
//     promote to Enforce;
//   - mutate and generate rules and cleanup policies have no failure
//     action and no Audit mode: what they promise is a change to the
//     cluster, and charter not making it is as silent as an Enforce rule
//     that never denies. They count as enforcing, so such a policy is
//     refused rather than admitted to look in force while doing nothing;
//   - a field outside spec.rules enforces when any rule of the policy does.
func Features(obj any) List {
	var kind, name string
	var spec any
	var enforces func(rule int) bool
	switch p := obj.(type) {
	case kyvernov1.PolicyInterface:
		kind, name, spec = p.GetKind(), policyid.Key(p), p.GetSpec()
		enforces = policyEnforces(p)
	case kyvernov2.CleanupPolicyInterface:
		kind, name, spec = p.GetKind(), cleanupKey(p), p.GetSpec()
		enforces = func(int) bool { return true }
	default:
		return nil
	}
	var applicable []*compiledFeature
	for _, f := range compiledFeatures() {
		if slices.Contains(f.kinds, kind) {
			applicable = append(applicable, f)
		}
	}
	if len(applicable) == 0 {
		return nil
	}
	raw, err := toJSONValue(spec)
	if err != nil {
		return nil
	}
	var out List
	check := func(path string, value any, rule map[string]any, ruleIndex int) {
		for _, f := range applicable {
			if !f.re.MatchString(path) || (f.when != nil && !f.when(value, rule)) {
				continue
			}
			out = append(out, &Finding{Kind: kind, Name: name, Field: path, Feature: f.name, Where: f.where, Enforce: enforces(ruleIndex)})
		}
	}
	check("spec", raw, nil, -1)
	walkFields(raw, "spec", nil, -1, check)
	return out
}

type compiledFeature struct {
	feature
	re *regexp.Regexp
}

// compiledFeatures turns the table's path patterns into anchored regular
// expressions, once.
var compiledFeatures = sync.OnceValue(func() []*compiledFeature {
	out := make([]*compiledFeature, len(unsupportedFeatures))
	for i, f := range unsupportedFeatures {
		pattern := regexp.QuoteMeta(f.path)
		pattern = strings.ReplaceAll(pattern, `\[\*\]`, `\[\d+\]`)
		pattern = strings.ReplaceAll(pattern, `\*\*\.`, `(?:.+\.)?`)
		out[i] = &compiledFeature{feature: f, re: regexp.MustCompile("^" + pattern + "$")}
	}
	return out
})

// opaqueFields hold user content, not policy structure: a pattern's keys
// are the resource's, generate data is the object to create, conditions
// and variable values are data. Their insides are never features.
var opaqueFields = map[string]bool{
	"pattern": true, "anyPattern": true, "patchStrategicMerge": true, "patchesJson6902": true,
	"data": true, "value": true, "default": true, "preconditions": true, "conditions": true, "deny": true,
}

// walkFields calls fn with the path of every field present in v (not of
// list elements themselves), the rule it sits in and that rule's index
// (-1 outside spec.rules).
func walkFields(v any, path string, rule map[string]any, ruleIndex int, fn func(path string, value any, rule map[string]any, ruleIndex int)) {
	switch t := v.(type) {
	case map[string]any:
		// In key order, so findings come in the same order every time.
		for _, k := range slices.Sorted(maps.Keys(t)) {
			child := t[k]
			if child == nil {
				continue
			}
			p := fault.JoinPath(path, k)
			fn(p, child, rule, ruleIndex)
			if !opaqueFields[k] {
				walkFields(child, p, rule, ruleIndex, fn)
			}
		}
	case []any:
		for i, child := range t {
			r, ri := rule, ruleIndex
			if path == "spec.rules" {
				r, _ = child.(map[string]any)
				ri = i
			}
			walkFields(child, path+"["+strconv.Itoa(i)+"]", r, ri, fn)
		}
	}
}

// policyEnforces returns whether rule i of p may deny or change
// something (see Features); i < 0 asks about the policy.
func policyEnforces(p kyvernov1.PolicyInterface) func(i int) bool {
	spec := p.GetSpec()
	staged := charter.IsStaged(p.GetLabels())
	rule := func(i int) bool {
		if i < 0 || i >= len(spec.Rules) {
			return false
		}
		r := &spec.Rules[i]
		switch {
		case r.Mutation != nil, r.Generation != nil:
			return true
		case staged:
			return true
		case r.Validation != nil:
			if anyEnforce(r.Validation.FailureActionOverrides) {
				return true
			}
			if a := r.Validation.FailureAction; a != nil && a.IsValid() {
				return a.Enforce()
			}
		case len(r.VerifyImages) > 0:
			set := false
			for _, iv := range r.VerifyImages {
				if iv.FailureAction != nil && iv.FailureAction.IsValid() {
					set = true
					if iv.FailureAction.Enforce() {
						return true
					}
				}
			}
			if set {
				return false
			}
		}
		return anyEnforce(spec.ValidationFailureActionOverrides) || spec.ValidationFailureAction.Enforce()
	}
	return func(i int) bool {
		if i >= 0 {
			return rule(i)
		}
		for j := range spec.Rules {
			if rule(j) {
				return true
			}
		}
		return false
	}
}

func anyEnforce(overrides []kyvernov1.ValidationFailureActionOverride) bool {
	for _, o := range overrides {
		if o.Action.IsValid() && o.Action.Enforce() {
			return true
		}
	}
	return false
}

func cleanupKey(p kyvernov2.CleanupPolicyInterface) string {
	if p.GetNamespace() != "" {
		return p.GetNamespace() + "/" + p.GetName()
	}
	return p.GetName()
}

func toJSONValue(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(data, &out)
	return out, err
}

// usesCELAuthorizer holds for a CEL expression that reads authorizer,
// which only admission binds (elsewhere the rule gives an error result).
// An expression that does not parse is left to the compiler's fault.
func usesCELAuthorizer(value any, _ map[string]any) bool {
	expr, ok := value.(string)
	return ok && celenv.ReadsIdent(expr, "authorizer")
}
