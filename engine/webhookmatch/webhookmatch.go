// Package webhookmatch reads off a policy of any kind the matchConditions
// charter's admission webhook for it carries for the API server to
// evaluate: a ClusterPolicy's or Policy's
// spec.webhookConfiguration.matchConditions, a policies.kyverno.io
// policy's spec.matchConditions that the API server's CEL environment
// compiles (its compiler, Compiler, also checks a ClusterPolicy's when
// engine/cpol compiles it). The webhook configuration and the policy cache
// read it without compiling a policy.
package webhookmatch

import (
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/lru"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/celruntime"
)

// Max is the API server's limit on a webhook's
// matchConditions.
const Max = 64

// Compiler compiles webhook matchConditions in the API
// server's own environment (no Kyverno or charter library), with
// authorizer declared and the rules for new expressions: what the API
// server accepts in a webhook configuration, so one policy can never make
// the configuration charter writes invalid.
var Compiler = sync.OnceValue(func() plugincel.Compiler {
	return plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
})

// Has reports whether the policy is served through a
// webhook of its own that carries conditions for the API server to
// evaluate (Kyverno's fine-grained webhook, admission-reports.md §2.3,
// cel-policy-types.md §3.6): a ClusterPolicy or Policy with
// spec.webhookConfiguration.matchConditions, or a policies.kyverno.io
// policy with spec.matchConditions the API server can evaluate
// (Conditions).
func Has(p kyvernov1.PolicyInterface) bool {
	return len(Conditions(p)) > 0
}

// Conditions are the conditions charter's webhook for p
// carries, nil when p shares a webhook with other policies.
//
// A ClusterPolicy's or Policy's are its spec.webhookConfiguration
// .matchConditions (compiled and checked when the policy is).
//
// A policies.kyverno.io policy's spec.matchConditions are its own, and
// the engine always evaluates all of them; as Kyverno does, the webhook
// carries those the API server can evaluate too, so a request they reject
// never reaches charter and one the API server cannot evaluate gets the
// API server's answer under the policy's failurePolicy (Kyverno's e2e
// tests expect its message, "expression '…' resulted in error: …"). Left
// out are conditions the API server's environment does not compile
// (Kyverno's libraries, such as image()), those reading namespaceObject
// (null in a webhook's conditions), names the API server refuses, and
// any past its limit of 64: leaving one out only lets more requests
// through to the engine, which decides. For a Pod policy with autogen
// copies the conditions are guarded to Pods (request.resource), since
// the webhook also receives the Pod controllers, which the engine matches
// with rewritten conditions of its own.
func Conditions(p kyvernov1.PolicyInterface) []admissionregistrationv1.MatchCondition {
	var (
		conditions []admissionregistrationv1.MatchCondition
		podOnly    bool
	)
	switch t := p.(type) {
	case *kyvernov1.ClusterPolicy, *kyvernov1.Policy:
		return p.GetSpec().GetMatchConditions()
	case policiesv1.ValidatingPolicyLike:
		spec := t.GetValidatingPolicySpec()
		conditions, podOnly = spec.MatchConditions, len(autogen.ValidatingPolicy(spec)) > 0
	case policiesv1.ImageValidatingPolicyLike:
		spec := t.GetImageValidatingPolicySpec()
		var pc *policiesv1.PodControllersGenerationConfiguration
		if ag := spec.AutogenConfiguration; ag != nil {
			pc = ag.PodControllers
		}
		conditions, podOnly = spec.MatchConditions, len(autogen.PodControllerTargets(spec.MatchConstraints, pc)) > 0
	case policiesv1.MutatingPolicyLike:
		spec := t.GetMutatingPolicySpec()
		conditions, podOnly = spec.MatchConditions, len(autogen.MutatingPolicy(spec)) > 0
	case policiesv1.GeneratingPolicyLike:
		conditions = t.GetGeneratingPolicySpec().MatchConditions
	default:
		return nil
	}
	var out []admissionregistrationv1.MatchCondition
	seen := make(map[string]bool, len(conditions))
	for _, mc := range conditions {
		if len(out) == Max {
			break
		}
		expr := strings.TrimSpace(mc.Expression)
		if seen[mc.Name] || len(validation.IsQualifiedName(mc.Name)) > 0 || !apiServerEvaluates(expr) {
			continue
		}
		seen[mc.Name] = true
		if podOnly {
			expr = podRequestGuard + " || (" + expr + ")"
		}
		out = append(out, admissionregistrationv1.MatchCondition{Name: mc.Name, Expression: expr})
	}
	return out
}

// podRequestGuard is true for a request on anything but Pods (their
// subresources included).
const podRequestGuard = "!(request.resource.group == '' && request.resource.resource == 'pods')"

// apiServerConditions remembers, by expression, whether the API server
// evaluates a webhook match condition: the webhook configuration is built
// again on every policy change, and the policy cache asks too.
var apiServerConditions = lru.New(4096)

// apiServerEvaluates reports whether expr compiles as a webhook match
// condition in the API server's environment (Compiler)
// and does not read namespaceObject, which the API server declares but
// binds to null for webhooks.
func apiServerEvaluates(expr string) bool {
	if v, ok := apiServerConditions.Get(expr); ok {
		return v.(bool)
	}
	ok := expr != ""
	if ok {
		decls := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
		res := Compiler().CompileCELExpression(&celruntime.Accessor{Name: "condition", Expr: expr, Returns: celruntime.BoolReturn()}, decls, environment.NewExpressions)
		ok = res.Error == nil && !mayReadIdent(expr, "namespaceObject")
	}
	apiServerConditions.Add(expr, ok)
	return ok
}

// mayReadIdent reports whether the CEL expression reads the identifier;
// one that does not parse (with the optional syntax the API server
// allows) may.
func mayReadIdent(expr, ident string) bool {
	reads, parsed := celenv.IdentRead(expr, ident)
	return reads || !parsed
}
