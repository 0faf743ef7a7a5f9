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

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
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
	programs []celProgram
}

// webhookConditionsCompiler compiles webhook matchConditions in the API
// server's own environment (no Kyverno or charter library), with
// authorizer declared and the rules for new expressions: what the API
// server accepts in a webhook configuration, so one policy can never make
// the configuration charter writes invalid.
var webhookConditionsCompiler = sync.OnceValue(func() plugincel.Compiler {
	return plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
})

// compiledWebhookConditions holds the compiled conditions still in use,
// by source, as celRules does for validate.cel rules.
var compiledWebhookConditions weakCache[webhookConditions]

const webhookConditionsPath = "spec.webhookConfiguration.matchConditions"

// compileWebhookConditions checks and compiles the policy's webhook
// matchConditions as the API server validates a webhook's: at most 64,
// each with a unique qualified name and a boolean expression. nil when
// the policy has none.
func compileWebhookConditions(conditions []admissionregistrationv1.MatchCondition, f *faults) *webhookConditions {
	if len(conditions) == 0 {
		return nil
	}
	return compiledWebhookConditions.compile(conditions, webhookConditionsPath, f, func() *webhookConditions {
		return compileWebhookConditionsOnce(conditions, f)
	})
}

func compileWebhookConditionsOnce(conditions []admissionregistrationv1.MatchCondition, f *faults) *webhookConditions {
	const path = webhookConditionsPath
	if len(conditions) > maxWebhookConditions {
		f.add(path, fmt.Sprintf("%d conditions: a webhook takes at most %d", len(conditions), maxWebhookConditions))
	}
	out := &webhookConditions{}
	decls := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	seen := make(map[string]bool, len(conditions))
	for i, mc := range conditions {
		field := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case mc.Name == "":
			f.add(field+".name", "a match condition needs a name")
		case seen[mc.Name]:
			f.add(field+".name", fmt.Sprintf("duplicate match condition name %q", mc.Name))
		default:
			for _, msg := range validation.IsQualifiedName(mc.Name) {
				f.add(field+".name", fmt.Sprintf("%q: %s", mc.Name, msg))
			}
		}
		seen[mc.Name] = true
		expr := strings.TrimSpace(mc.Expression)
		if expr == "" {
			f.add(field+".expression", "expression must not be empty")
			continue
		}
		res := webhookConditionsCompiler().CompileCELExpression(&celAccessor{name: mc.Name, expr: expr, returns: boolReturn()}, decls, environment.NewExpressions)
		if res.Error != nil {
			f.add(field+".expression", celFault(res.Error.Detail))
			continue
		}
		out.programs = append(out.programs, celProgram{expr: expr, program: res.Program})
	}
	return out
}

// WithWebhookConditionsMet tells the evaluation that the API server has
// already evaluated the policies' spec.webhookConfiguration.matchConditions
// (the request came through the policy's own webhook), so the engine does
// not evaluate them again. Admission passes it; without it a policy whose
// conditions do not hold for the request is left out.
func WithWebhookConditionsMet() EvalOption {
	return func(c *evalConfig) { c.webhookConditionsMet = true }
}

// holds reports whether every condition is true for the request: false
// when one is false or cannot be evaluated (Kyverno's engine leaves the
// policy out in both cases). It costs nothing for a policy without
// conditions.
func (w *webhookConditions) holds(in *requestView) bool {
	if w == nil || in.cfg.webhookConditionsMet {
		return true
	}
	e := &celEvaluator{act: in.celActivation(false), budget: celconfig.RuntimeCELCostBudget}
	for i := range w.programs {
		val, err := e.eval(&w.programs[i])
		if err != nil || val != types.True {
			return false
		}
	}
	return true
}

// HasWebhookConditions reports whether the policy has
// spec.webhookConfiguration.matchConditions: at admission it is served
// through a webhook of its own, which carries them (Kyverno's fine-grained
// webhook, admission-reports.md §2.3). Only ClusterPolicy and Policy have
// the field; the CEL kinds' matchConditions are their own (spec.matchConditions).
func HasWebhookConditions(p kyvernov1.PolicyInterface) bool {
	switch p.(type) {
	case *kyvernov1.ClusterPolicy, *kyvernov1.Policy:
		return len(p.GetSpec().GetMatchConditions()) > 0
	}
	return false
}
