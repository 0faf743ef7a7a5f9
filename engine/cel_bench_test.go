package engine

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/fault"
)

// podSecurityCELPolicies loads the CEL edition of the Pod Security library
// from the conformance corpus (baseline and restricted).
func podSecurityCELPolicies(b *testing.B) []kyvernov1.PolicyInterface {
	return podSecurityLibrary(b, "pod-security-cel")
}

// BenchmarkValidatePodCEL is BenchmarkValidatePod through the CEL edition
// of the library: every validate.cel rule evaluated per Pod.
func BenchmarkValidatePodCEL(b *testing.B) {
	benchValidatePods(b, podSecurityCELPolicies(b))
}

// BenchmarkCompileCEL compiles the CEL library again and again; compiled
// rules are shared by source, so this is the cost of recompiling policies
// that did not change.
func BenchmarkCompileCEL(b *testing.B) { benchCompile(b, podSecurityCELPolicies(b)) }

// BenchmarkCompileVPolWithVariables compiles a ValidatingPolicy with
// variables from scratch (no cache), as the CLI does for each policy of a
// suite: the cost of its CEL environment and type checks.
func BenchmarkCompileVPolWithVariables(b *testing.B) {
	pods := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	spec := &policiesv1.ValidatingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{pods}},
		Variables: []admissionregistrationv1.Variable{
			{Name: "containers", Expression: "object.spec.containers + object.spec.?initContainers.orValue([])"},
			{Name: "images", Expression: "variables.containers.map(c, c.image)"},
		},
		Validations: []admissionregistrationv1.Validation{
			{Expression: "variables.images.all(i, !i.endsWith(':latest'))", Message: "no latest tag"},
			{Expression: "variables.containers.all(c, has(c.resources))", MessageExpression: "'resources missing in ' + object.metadata.name"},
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		f := &fault.Collector{}
		if compileVPolVariantUncached(spec, "spec", f) == nil || len(f.Errs) > 0 {
			b.Fatal(f.Errs)
		}
	}
}
