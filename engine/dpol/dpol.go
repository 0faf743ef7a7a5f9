// Package dpol is the DeletingPolicy kind (cel-policy-types.md §3.3.4):
// the compiled DeletingPolicy or NamespacedDeletingPolicy and its decision
// on one object. engine/cleanup wraps it in a cleanup.Policy, which the
// cleanup controller schedules (schedule, dry run, the run's exceptions).
package dpol

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
)

// Policy is a compiled DeletingPolicy or NamespacedDeletingPolicy
// (cel-policy-types.md §3.3.4): the resources its matchConstraints name
// (operations ignored), whose conditions, over object, namespaceObject and
// variables, all hold.
type Policy struct {
	match      *celruntime.Constraints
	compiler   *celruntime.Compiler
	conditions []celruntime.Program
	resources  []schema.GroupVersionResource
}

// Compile compiles what selects a DeletingPolicy's objects:
// its matchConstraints, the resources they name, its variables and
// conditions. Faults go to f.
func Compile(spec *policiesv1.DeletingPolicySpec, f *fault.Collector) *Policy {
	dp := &Policy{}
	if spec.MatchConstraints == nil || len(spec.MatchConstraints.ResourceRules) == 0 {
		f.Add("spec.matchConstraints", "a matchConstraints with at least one resource rule is required")
	} else {
		mc := spec.MatchConstraints.DeepCopy()
		for i := range mc.ResourceRules {
			// There is no request: operations select nothing.
			mc.ResourceRules[i].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
			r := &mc.ResourceRules[i]
			for j, res := range r.Resources {
				field := fmt.Sprintf("spec.matchConstraints.resourceRules[%d].resources[%d]", i, j)
				if res == "*" || strings.Contains(res, "/") {
					f.Add(field, fmt.Sprintf("%q: a DeletingPolicy must name the resources it deletes, without wildcards or subresources", res))
					continue
				}
				for _, g := range r.APIGroups {
					for _, v := range r.APIVersions {
						dp.resources = append(dp.resources, schema.GroupVersionResource{Group: g, Version: v, Resource: res})
					}
				}
			}
		}
		var err error
		if dp.match, err = celruntime.CompileConstraints(mc); err != nil {
			f.Add("spec.matchConstraints", err.Error())
		}
	}
	envCompiler, err := celruntime.PolicyCompiler()
	if err == nil {
		dp.compiler = envCompiler.ForPolicy()
	}
	if err != nil {
		f.Add("spec", "CEL environment: "+err.Error())
		return nil
	}
	fields := celruntime.Fields{Compiler: dp.compiler, Faults: f}
	fields.Variables(spec.Variables, "spec.variables")
	dp.conditions = fields.Conditions(spec.Conditions, "spec.conditions")
	return dp
}

// Resources are the resources the policy lists (group and version may be
// "*").
func (dp *Policy) Resources() []schema.GroupVersionResource { return dp.resources }

// Selects decides on the object of in: libNamespace is the namespace the
// policy's libraries read in ("" for a cluster-wide policy), scope the
// one its exceptions act in; key names the policy in errors.
func (dp *Policy) Selects(in *review.View, libNamespace, scope, key string, own celruntime.Owner) (bool, error) {
	if !dp.match.Matches(in) {
		return false, nil
	}
	ci := celruntime.InputsOf(in)
	// A DeletingPolicy has no request: oldObject and request are null.
	act := &celruntime.PolicyActivation{
		Activation: celruntime.Activation{In: ci, Object: ci.Object, OldObject: types.NullValue, Request: types.NullValue, Params: types.NullValue},
		Libs:       celruntime.NewLibReceivers(in.Ctx, &in.Opts.Loaders, libNamespace),
	}
	cctx := dp.compiler.CreateContext(in.Ctx)
	act.Variables = cctx.Variables(act)
	e := &celruntime.Evaluator{Ctx: cctx, Act: act, Budget: celconfig.RuntimeCELCostBudget}
	// A PolicyException that names the policy and whose conditions hold
	// keeps the object.
	_, exempt, err := own.EvalExceptions(e, scope, false)
	if err != nil {
		return false, fmt.Errorf("exceptions of %s %s: %v", own.Source.GetKind(), key, err)
	}
	if exempt != nil {
		return false, nil
	}
	for i := range dp.conditions {
		val, err := e.Eval(&dp.conditions[i])
		if err != nil {
			return false, fmt.Errorf("conditions of %s %s: %v", own.Source.GetKind(), key, err)
		}
		if val != types.True {
			return false, nil
		}
	}
	return true, nil
}
