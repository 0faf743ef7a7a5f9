package engine

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/lru"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
)

// maxWebhookConditions is the API server's limit on a webhook's
// matchConditions.
const maxWebhookConditions = 64

// webhookConditions are a ClusterPolicy's or Policy's
// spec.webhookConfiguration.matchConditions, compiled.
//
// At admission the API server evaluates them: the policy gets a webhook of
// its own carrying them (webhook/config), so a request they reject never
// reaches charter, authorizer included, and an error follows the policy's
// failurePolicy. Everywhere else (background scans, the background
// controller, the CLI) the engine evaluates them before the policy runs,
// as Kyverno's engine does (MatchPolicyContext): a false condition, or one
// that cannot be evaluated, leaves the policy out for that resource. The
// engine has no authorizer to bind, so a condition that reads it cannot be
// evaluated there, as in Kyverno.
type webhookConditions struct {
	programs []celruntime.Program
}

// webhookConditionsCompiler compiles webhook matchConditions in the API
// server's own environment (no Kyverno or charter library), with
// authorizer declared and the rules for new expressions: what the API
// server accepts in a webhook configuration, so one policy can never make
// the configuration charter writes invalid.
var webhookConditionsCompiler = sync.OnceValue(func() plugincel.Compiler {
	return plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
})

const webhookConditionsPath = "spec.webhookConfiguration.matchConditions"

// compileWebhookConditions checks and compiles the policy's webhook
// matchConditions as the API server validates a webhook's: at most 64,
// each with a unique qualified name and a boolean expression. nil when
// the policy has none. cache, when not nil, holds conditions compiled
// before.
func compileWebhookConditions(conditions []admissionregistrationv1.MatchCondition, cache *celruntime.Cache, f *fault.Collector) *webhookConditions {
	if len(conditions) == 0 {
		return nil
	}
	return celruntime.Cached(cache, conditions, webhookConditionsPath, f, func() *webhookConditions {
		return compileWebhookConditionsOnce(conditions, f)
	})
}

func compileWebhookConditionsOnce(conditions []admissionregistrationv1.MatchCondition, f *fault.Collector) *webhookConditions {
	const path = webhookConditionsPath
	if len(conditions) > maxWebhookConditions {
		f.Add(path, fmt.Sprintf("%d conditions: a webhook takes at most %d", len(conditions), maxWebhookConditions))
	}
	out := &webhookConditions{}
	decls := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	seen := make(map[string]bool, len(conditions))
	for i, mc := range conditions {
		field := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case mc.Name == "":
			f.Add(field+".name", "a match condition needs a name")
		case seen[mc.Name]:
			f.Add(field+".name", fmt.Sprintf("duplicate match condition name %q", mc.Name))
		default:
			for _, msg := range validation.IsQualifiedName(mc.Name) {
				f.Add(field+".name", fmt.Sprintf("%q: %s", mc.Name, msg))
			}
		}
		seen[mc.Name] = true
		expr := strings.TrimSpace(mc.Expression)
		if expr == "" {
			f.Add(field+".expression", "expression must not be empty")
			continue
		}
		res := webhookConditionsCompiler().CompileCELExpression(&celruntime.Accessor{Name: mc.Name, Expr: expr, Returns: celruntime.BoolReturn()}, decls, environment.NewExpressions)
		if res.Error != nil {
			f.Add(field+".expression", celruntime.Fault(res.Error.Detail))
			continue
		}
		out.programs = append(out.programs, celruntime.Program{Expr: expr, Prog: res.Program})
	}
	return out
}

// WithWebhookConditionsMet tells the evaluation that the API server has
// already evaluated the policies' spec.webhookConfiguration.matchConditions
// (the request came through the policy's own webhook), so the engine does
// not evaluate them again. Admission passes it; without it a policy whose
// conditions do not hold for the request is left out.
func WithWebhookConditionsMet() EvalOption {
	return func(c *review.Options) { c.WebhookConditionsMet = true }
}

// holds reports whether every condition is true for the request: false
// when one is false or cannot be evaluated (Kyverno's engine leaves the
// policy out in both cases). It costs nothing for a policy without
// conditions.
func (w *webhookConditions) holds(in *requestView) bool {
	if w == nil || in.Opts.WebhookConditionsMet {
		return true
	}
	e := &celruntime.Evaluator{Act: celruntime.ActivationOf(&in.View, false), Budget: celconfig.RuntimeCELCostBudget}
	for i := range w.programs {
		val, err := e.Eval(&w.programs[i])
		if err != nil || val != types.True {
			return false
		}
	}
	return true
}

// HasWebhookConditions reports whether the policy is served through a
// webhook of its own that carries conditions for the API server to
// evaluate (Kyverno's fine-grained webhook, admission-reports.md §2.3,
// cel-policy-types.md §3.6): a ClusterPolicy or Policy with
// spec.webhookConfiguration.matchConditions, or a policies.kyverno.io
// policy with spec.matchConditions the API server can evaluate
// (WebhookMatchConditions).
func HasWebhookConditions(p kyvernov1.PolicyInterface) bool {
	return len(WebhookMatchConditions(p)) > 0
}

// WebhookMatchConditions are the conditions charter's webhook for p
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
func WebhookMatchConditions(p kyvernov1.PolicyInterface) []admissionregistrationv1.MatchCondition {
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
		if len(out) == maxWebhookConditions {
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
// condition in the API server's environment (webhookConditionsCompiler)
// and does not read namespaceObject, which the API server declares but
// binds to null for webhooks.
func apiServerEvaluates(expr string) bool {
	if v, ok := apiServerConditions.Get(expr); ok {
		return v.(bool)
	}
	ok := expr != ""
	if ok {
		decls := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
		res := webhookConditionsCompiler().CompileCELExpression(&celruntime.Accessor{Name: "condition", Expr: expr, Returns: celruntime.BoolReturn()}, decls, environment.NewExpressions)
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
