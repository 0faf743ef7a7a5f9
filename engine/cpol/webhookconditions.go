package cpol

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/webhookmatch"
)

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
	if len(conditions) > webhookmatch.Max {
		f.Add(path, fmt.Sprintf("%d conditions: a webhook takes at most %d", len(conditions), webhookmatch.Max))
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
		res := webhookmatch.Compiler().CompileCELExpression(&celruntime.Accessor{Name: mc.Name, Expr: expr, Returns: celruntime.BoolReturn()}, decls, environment.NewExpressions)
		if res.Error != nil {
			f.Add(field+".expression", celruntime.Fault(res.Error.Detail))
			continue
		}
		out.programs = append(out.programs, celruntime.Program{Expr: expr, Prog: res.Program})
	}
	return out
}

// holds reports whether every condition is true for the request: false
// when one is false or cannot be evaluated (Kyverno's engine leaves the
// policy out in both cases). It costs nothing for a policy without
// Conditions.
func (w *webhookConditions) holds(in *review.View) bool {
	if w == nil || in.Opts.WebhookConditionsMet {
		return true
	}
	e := &celruntime.Evaluator{Act: celruntime.ActivationOf(in, false), Budget: celconfig.RuntimeCELCostBudget}
	for i := range w.programs {
		val, err := e.Eval(&w.programs[i])
		if err != nil || val != types.True {
			return false
		}
	}
	return true
}
