// Package celschema holds what the CRD schemas of the policies.kyverno.io
// kinds refuse that the kinds' own compiles do not look at, in the API
// server's words: the checks the engine makes before it compiles a CEL
// kind's policy, for the GitOps pre-apply check and the CLI as for
// admission.
package celschema

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/fault"
)

// Faults are what Kyverno 1.19 refuses of a policies.kyverno.io
// policy that the kind's own compile does not look at: mostly what the
// CRD schemas refuse before Kyverno's policy webhook is asked (an enum
// value they do not list, a required field left out, two entries of a set
// or of a list keyed by name that are the same), in the API server's words
// (`spec.failurePolicy: Unsupported value: "Sometimes": supported values:
// "Ignore", "Fail"`). charter's own CRDs refuse most of them at admission
// too; checked here, the GitOps pre-apply check and the CLI refuse them as
// well. nil for any other kind. The engine's Compile and
// cleanup.Compile ask it first and stop at its faults, as the API
// server stops before the webhook. docs/policy-validation.md, "The CEL
// kinds, line by line", lists each check with its testdata file.
func Faults(src any, name string) fault.List {
	var c schemaChecks
	switch p := src.(type) {
	case policiesv1.ValidatingPolicyLike:
		c.kind = p.GetKind()
		s := p.GetValidatingPolicySpec()
		c.validating(s.FailurePolicy, s.ValidationAction, s.MatchConditions, s.Variables, s.Validations, s.AuditAnnotations)
	case policiesv1.MutatingPolicyLike:
		c.kind = p.GetKind()
		s := p.GetMutatingPolicySpec()
		c.failurePolicy(s.FailurePolicy)
		c.conditions("spec.matchConditions", s.MatchConditions)
		c.conditions("spec.targetMatchConditions", s.TargetMatchConditions)
		c.variables(s.Variables)
		c.auditAnnotations(s.AuditAnnotations)
		c.enum("spec.reinvocationPolicy", string(s.ReinvocationPolicy), string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy))
		for i, m := range s.Mutations {
			c.required(fmt.Sprintf("spec.mutations[%d].patchType", i), m.PatchType == "")
		}
		if a := s.AutogenConfiguration; a != nil && a.MutatingAdmissionPolicy != nil && a.MutatingAdmissionPolicy.Enabled != nil && *a.MutatingAdmissionPolicy.Enabled {
			// A MutatingAdmissionPolicy's matchConditions cannot read
			// variables (cel-policy-types.md §2.3).
			for i, mc := range s.MatchConditions {
				if celenv.ReadsIdent(mc.Expression, "variables") {
					c.add(field.Invalid(field.NewPath(fmt.Sprintf("spec.matchConditions[%d].expression", i)), mc.Expression,
						"variables cannot be referenced in matchConditions when spec.autogen.mutatingAdmissionPolicy.enabled is true"))
				}
			}
		}
	case policiesv1.GeneratingPolicyLike:
		c.kind = p.GetKind()
		s := p.GetGeneratingPolicySpec()
		c.conditions("spec.matchConditions", s.MatchConditions)
		c.variables(s.Variables)
		c.auditAnnotations(s.AuditAnnotations)
		c.required("spec.generate", s.Generation == nil)
		for i, g := range s.Generation {
			if g.Template != nil {
				c.required(fmt.Sprintf("spec.generate[%d].template.value", i), g.Template.Value == "")
			}
		}
	case policiesv1.ImageValidatingPolicyLike:
		c.kind = p.GetKind()
		s := p.GetImageValidatingPolicySpec()
		c.validating(s.FailurePolicy, s.ValidationAction, s.MatchConditions, s.Variables, s.Validations, s.AuditAnnotations)
		c.required("spec.attestors", s.Attestors == nil)
		c.required("spec.validations", s.Validations == nil)
		for i, a := range s.Attestors {
			c.required(fmt.Sprintf("spec.attestors[%d].name", i), a.Name == "")
		}
		for i, a := range s.Attestations {
			c.required(fmt.Sprintf("spec.attestations[%d].name", i), a.Name == "")
		}
		for i, im := range s.Images {
			c.required(fmt.Sprintf("spec.images[%d].name", i), im.Name == "")
			c.required(fmt.Sprintf("spec.images[%d].expression", i), im.Expression == "")
		}
	case policiesv1.DeletingPolicyLike:
		c.kind = p.GetKind()
		s := p.GetDeletingPolicySpec()
		c.required("spec.schedule", s.Schedule == "")
		c.conditions("spec.conditions", s.Conditions)
		c.variables(s.Variables)
		if dp := s.DeletionPropagationPolicy; dp != nil {
			c.enum("spec.deletionPropagationPolicy", string(*dp), string(metav1.DeletePropagationOrphan), string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationForeground))
		}
	default:
		return nil
	}
	for _, e := range c.errs {
		e.Name = name
	}
	return c.errs
}

// schemaChecks collects the faults of one policy, each in the words the
// API server gives them (field.Error's body).
type schemaChecks struct {
	kind string
	errs fault.List
}

func (c *schemaChecks) add(e *field.Error) {
	c.errs = append(c.errs, &fault.Fault{Kind: c.kind, Field: e.Field, Fault: e.ErrorBody()})
}

// required: a field the schema requires is left out.
func (c *schemaChecks) required(path string, missing bool) {
	if missing {
		c.add(field.Required(field.NewPath(path), ""))
	}
}

// enum: a value set but not one the schema lists.
func (c *schemaChecks) enum(path, value string, allowed ...string) {
	if value == "" {
		return
	}
	for _, a := range allowed {
		if value == a {
			return
		}
	}
	c.add(field.NotSupported(field.NewPath(path), value, allowed))
}

// validating checks the fields a ValidatingPolicy and an
// ImageValidatingPolicy share.
func (c *schemaChecks) validating(fp *admissionregistrationv1.FailurePolicyType, actions []admissionregistrationv1.ValidationAction,
	conditions []admissionregistrationv1.MatchCondition, vars []admissionregistrationv1.Variable,
	validations []admissionregistrationv1.Validation, annotations []admissionregistrationv1.AuditAnnotation) {
	c.failurePolicy(fp)
	c.actions(actions)
	c.conditions("spec.matchConditions", conditions)
	c.variables(vars)
	c.validations(validations)
	c.auditAnnotations(annotations)
}

// failurePolicy: Ignore or Fail.
func (c *schemaChecks) failurePolicy(fp *admissionregistrationv1.FailurePolicyType) {
	if fp != nil {
		c.enum("spec.failurePolicy", string(*fp), string(admissionregistrationv1.Ignore), string(admissionregistrationv1.Fail))
	}
}

// actions: validationActions is a set (listType=set). An action it does
// not know is refused as the policy compiles (celValidationAction).
func (c *schemaChecks) actions(actions []admissionregistrationv1.ValidationAction) {
	seen := map[admissionregistrationv1.ValidationAction]bool{}
	for i, a := range actions {
		if seen[a] {
			c.add(field.Duplicate(field.NewPath(fmt.Sprintf("spec.validationActions[%d]", i)), string(a)))
		}
		seen[a] = true
	}
}

// named checks a list keyed by name (listType=map, listMapKey=name): each
// entry needs its name and its expression, and no two share a name.
func (c *schemaChecks) named(path string, entries []namedExpression) {
	seen := map[string]bool{}
	for i, e := range entries {
		at := fmt.Sprintf("%s[%d]", path, i)
		c.required(at+".name", e.name == "")
		c.required(at+".expression", e.expression == "")
		if e.name == "" {
			continue
		}
		if seen[e.name] {
			c.add(field.Duplicate(field.NewPath(at), map[string]interface{}{"name": e.name}))
		}
		seen[e.name] = true
	}
}

// namedExpression is an entry of a list keyed by name.
type namedExpression struct{ name, expression string }

func (c *schemaChecks) conditions(path string, conditions []admissionregistrationv1.MatchCondition) {
	entries := make([]namedExpression, len(conditions))
	for i, mc := range conditions {
		entries[i] = namedExpression{mc.Name, mc.Expression}
	}
	c.named(path, entries)
}

func (c *schemaChecks) variables(vars []admissionregistrationv1.Variable) {
	entries := make([]namedExpression, len(vars))
	for i, v := range vars {
		entries[i] = namedExpression{v.Name, v.Expression}
	}
	c.named("spec.variables", entries)
}

func (c *schemaChecks) validations(validations []admissionregistrationv1.Validation) {
	for i, v := range validations {
		c.required(fmt.Sprintf("spec.validations[%d].expression", i), v.Expression == "")
	}
}

// auditAnnotations: each needs its valueExpression (a key left out is
// refused as the policy compiles).
func (c *schemaChecks) auditAnnotations(annotations []admissionregistrationv1.AuditAnnotation) {
	for i, a := range annotations {
		c.required(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), a.ValueExpression == "")
	}
}
