package celruntime

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
)

// Exception is a compiled policies.kyverno.io PolicyException
// (cel-policy-types.md §5).
type Exception struct {
	src        *policiesv1.PolicyException
	key        string
	compiler   *Compiler
	conditions []Program
	priority   int
	scope      ExceptionScope
}

// ExceptionScope says where a policies.kyverno.io PolicyException acts.
type ExceptionScope int

const (
	// ExceptionOwnNamespace: on requests in the exception's namespace
	// only (charter test and apply, and any exception charter does not
	// trust more).
	ExceptionOwnNamespace ExceptionScope = iota
	// ExceptionAnyNamespace: on every request its matchConditions select,
	// as Kyverno applies the exceptions of its --exceptionNamespace; the
	// cluster gives this scope to exceptions from the namespaces of
	// --exception-namespaces, and ignores the others.
	ExceptionAnyNamespace
)

// priorityLabel orders exceptions that exempt the same request: the
// highest decides the result (skip or pass).
const priorityLabel = "polex.kyverno.io/priority"

// CompileException compiles a policies.kyverno.io PolicyException acting
// in scope.
func CompileException(src *policiesv1.PolicyException, scope ExceptionScope) (*Exception, fault.List) {
	key := src.Name
	if src.Namespace != "" {
		key = src.Namespace + "/" + src.Name
	}
	f := &fault.Collector{Kind: "PolicyException", Name: key}
	if len(src.Spec.PolicyRefs) == 0 {
		f.Add("spec.policyRefs", "must specify at least one policy ref")
	}
	for i, r := range src.Spec.PolicyRefs {
		if r.Name == "" {
			f.Add(fmt.Sprintf("spec.policyRefs[%d].name", i), "must specify policy name")
		}
		if r.Kind == "" {
			f.Add(fmt.Sprintf("spec.policyRefs[%d].kind", i), "must specify policy kind")
		}
	}
	switch src.Spec.ReportResult {
	case "", "skip", "pass":
	default:
		f.Add("spec.reportResult", fmt.Sprintf("unknown result %q, want skip or pass", src.Spec.ReportResult))
	}
	ex := &Exception{src: src, key: key, scope: scope}
	if v, ok := src.Labels[priorityLabel]; ok {
		ex.priority, _ = strconv.Atoi(v)
	}
	envCompiler, err := PolicyCompiler()
	if err == nil {
		ex.compiler = envCompiler.ForPolicy()
	}
	if err != nil {
		f.Add("spec", "CEL environment: "+err.Error())
		return nil, f.Errs
	}
	for i, mc := range src.Spec.MatchConditions {
		field := fmt.Sprintf("spec.matchConditions[%d].expression", i)
		res := ex.compiler.CompileCELExpression(&Accessor{Name: mc.Name, Expr: mc.Expression, Returns: BoolReturn()},
			plugincel.OptionalVariableDeclarations{}, environment.StoredExpressions)
		if res.Error != nil {
			f.Add(field, Fault(res.Error.Detail))
			continue
		}
		ex.conditions = append(ex.conditions, Program{Expr: mc.Expression, Prog: res.Program})
	}
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	return ex, nil
}

// refers reports whether the exception names the policy.
func (ex *Exception) refers(kind, name string) bool {
	for _, r := range ex.src.Spec.PolicyRefs {
		if r.Kind == kind && r.Name == name {
			return true
		}
	}
	return false
}

// Exemption is the exceptions that fully exempt a request.
type Exemption struct {
	exs  []*Exception
	Pass bool
}

// Keys are the exempting exceptions' namespace/name keys, joined.
func (x *Exemption) Keys() string {
	out := make([]string, len(x.exs))
	for i, e := range x.exs {
		out[i] = e.key
	}
	return strings.Join(out, ", ")
}

// Outcome is the result of a policy the exemption exempts: skipped, or
// passed when the exception asks its result be reported as a pass,
// naming the exceptions in the result's properties.
func (x *Exemption) Outcome() review.Outcome {
	o := review.Skip("rule is skipped due to policy exception: " + x.Keys())
	if x.Pass {
		o = review.Pass("rule is passed due to policy exception: " + x.Keys())
	}
	o.Props = map[string]string{"exceptions": x.Names()}
	return o
}

// Names are the exempting exceptions' names, joined.
func (x *Exemption) Names() string {
	out := make([]string, len(x.exs))
	for i, e := range x.exs {
		out[i] = e.src.Name
	}
	return strings.Join(out, ",")
}

// noExceptions is the exceptions variable when no exception lists images
// or values, as for most policies: one value for all, as it never changes.
var noExceptions = types.DefaultTypeAdapter.NativeToValue(map[string]any{"allowedImages": []any{}, "allowedValues": []any{}})

// EvalExceptions evaluates the exceptions of exs that name the policy
// (kind and name) for a request acting in namespace scope. It returns the
// policy's exceptions variable (the images and values the exceptions that
// hold allow) and the exemption, if some exception exempts the request.
// With anyExempts (ImageValidatingPolicies), every exception that holds
// exempts the request, whatever its images and allowedValues.
func EvalExceptions(exs []*Exception, kind, name string, e *Evaluator, scope string, anyExempts bool) (ref.Val, *Exemption, error) {
	var images, values []any
	var exempt *Exemption
	var chosen *Exception
	for _, ex := range exs {
		if !ex.refers(kind, name) {
			continue
		}
		// Tenancy: an exception acts in its own namespace only, unless
		// it comes from a namespace trusted with any.
		if ex.scope == ExceptionOwnNamespace && ex.src.Namespace != "" && ex.src.Namespace != scope {
			continue
		}
		// An exception has no variables: nothing charges a composition.
		ee := &Evaluator{Act: e.Act, Budget: celconfig.RuntimeCELCostBudget}
		holds := true
		for i := range ex.conditions {
			val, err := ee.Eval(&ex.conditions[i])
			if err != nil {
				if exempt != nil {
					break
				}
				return nil, nil, fmt.Errorf("PolicyException %s: %v", ex.key, err)
			}
			if val != types.True {
				holds = false
				break
			}
		}
		if !holds {
			continue
		}
		spec := &ex.src.Spec
		if anyExempts || len(spec.Images) == 0 && len(spec.AllowedValues) == 0 {
			if exempt == nil {
				exempt = &Exemption{}
			}
			exempt.exs = append(exempt.exs, ex)
			if chosen == nil || ex.priority > chosen.priority {
				chosen = ex
			}
			continue
		}
		for _, i := range spec.Images {
			images = append(images, i)
		}
		for _, v := range spec.AllowedValues {
			values = append(values, v)
		}
	}
	if exempt != nil {
		exempt.Pass = chosen.src.Spec.ReportResult == "pass"
	}
	if images == nil && values == nil {
		return noExceptions, exempt, nil
	}
	if images == nil {
		images = []any{}
	}
	if values == nil {
		values = []any{}
	}
	return types.DefaultTypeAdapter.NativeToValue(map[string]any{"allowedImages": images, "allowedValues": values}), exempt, nil
}
