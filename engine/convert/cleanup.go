package convert

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/cleanup"
)

// ConvertCleanup translates a ClusterCleanupPolicy or CleanupPolicy into a
// DeletingPolicy or NamespacedDeletingPolicy: match and exclude as
// matchConstraints and conditions, the JMESPath conditions (target is the
// resource) as CEL conditions, schedule and propagation as they are.
func ConvertCleanup(p kyvernov2.CleanupPolicyInterface) *Result {
	res := &Result{Cleanup: p}
	spec := p.GetSpec()
	rule := &kyvernov1.Rule{Name: p.GetName(), MatchResources: spec.MatchResources.V1()}
	if spec.ExcludeResources != nil {
		ex := spec.ExcludeResources.V1()
		rule.ExcludeResources = &ex
	}
	out := &convertedRule{name: p.GetName()}
	if _, err := matchConstraints(rule, out); err != nil {
		res.Problems = append(res.Problems, Problem{Reason: err.Error()})
		return res
	}
	for i := range out.matchConstraints.ResourceRules {
		out.matchConstraints.ResourceRules[i].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
	}
	scope := &jmesScope{variables: map[string]bool{}, vars: &iterNames{}, target: true}
	for _, c := range spec.Context {
		if err := contextVariable(c, scope, out); err != nil {
			res.Problems = append(res.Problems, Problem{Reason: wrap(err, "context %s", c.Name).Error()})
		}
	}
	if spec.Conditions != nil {
		e, err := scope.conditions(spec.Conditions)
		if err != nil {
			res.Problems = append(res.Problems, Problem{Reason: wrap(err, "conditions").Error()})
		} else {
			addCondition(out, "conditions", e)
		}
	}
	if len(res.Problems) > 0 {
		return res
	}
	dspec := policiesv1.DeletingPolicySpec{
		MatchConstraints:          out.matchConstraints,
		Conditions:                out.matchConditions,
		Variables:                 out.variables,
		Schedule:                  spec.Schedule,
		DeletionPropagationPolicy: spec.DeletionPropagationPolicy,
	}
	meta := metav1.ObjectMeta{Name: p.GetName(), Labels: p.GetLabels(), Annotations: p.GetAnnotations()}
	var obj kyvernov2.CleanupPolicyInterface
	var object runtime.Object
	if p.IsNamespaced() {
		meta.Namespace = p.GetNamespace()
		d := &policiesv1.NamespacedDeletingPolicy{ObjectMeta: meta, Spec: dspec}
		d.APIVersion, d.Kind = policiesv1.GroupVersion.String(), "NamespacedDeletingPolicy"
		obj, object = d, d
	} else {
		d := &policiesv1.DeletingPolicy{ObjectMeta: meta, Spec: dspec}
		d.APIVersion, d.Kind = policiesv1.GroupVersion.String(), "DeletingPolicy"
		obj, object = d, d
	}
	if _, err := cleanup.Compile(obj); err != nil {
		res.Problems = append(res.Problems, Problem{Reason: fmt.Sprintf("converted %s does not compile: %v", obj.GetKind(), err)})
		return res
	}
	res.Outputs = []Output{{Object: object, Name: p.GetName(), Kind: object.GetObjectKind().GroupVersionKind().Kind, Rules: []string{p.GetName()}}}
	return res
}
