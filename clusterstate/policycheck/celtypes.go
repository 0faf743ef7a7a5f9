package policycheck

import (
	"fmt"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/kube-openapi/pkg/validation/spec"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/match"
)

// CELTypeCluster is a Cluster that can type-check a validate.cel rule's
// expressions against the schemas of the kinds it matches.
type CELTypeCluster interface {
	Cluster
	CELTypeWarnings(p kyvernov1.PolicyInterface) ([]string, error)
}

// CELTypeWarnings are Kyverno's type-checking warnings of a ClusterPolicy
// or Policy that Kyverno can turn into a ValidatingAdmissionPolicy (one
// rule, a validate.cel rule; the type checker is the API server's, which
// checks a ValidatingAdmissionPolicy's expressions when it is written):
// each expression and messageExpression of the rule is type-checked
// against the OpenAPI schema of every kind the rule matches (and its
// paramKind's), and one that does not check is a warning
// "spec.rules[0].validate.cel.expressions[0].expression:<issues>", as
// Kyverno words it. A warning, not a refusal, as in Kyverno: the
// expression still runs, against objects whose fields it may not know.
// Kinds whose schema the API server does not publish are not checked.
//
// Only a DiscoveryCluster made WithCELTypeChecks checks; it asks the API
// server's OpenAPI v3 documents.
func (d *DiscoveryCluster) CELTypeWarnings(p kyvernov1.PolicyInterface) ([]string, error) {
	rules := p.GetSpec().Rules
	if !d.celTypes || len(rules) != 1 || !rules[0].HasValidateCEL() {
		return nil, nil
	}
	rule := rules[0]
	if !convertible(p.GetSpec(), &rule) {
		return nil, nil
	}
	cel := rule.Validation.CEL
	var resourceRules []admissionregistrationv1.NamedRuleWithOperations
	var matched []ServedKind
	for _, desc := range descriptions(ruleBlocks("spec.rules[0]", &rule.MatchResources, nil)[0]) {
		for _, sel := range desc.kinds {
			parsed := match.ParseKind(sel)
			if sel == "*" || parsed.SubResource != "" {
				continue
			}
			found, err := resolveResources(d, parsed)
			if err != nil {
				return nil, err
			}
			for _, k := range found {
				matched = append(matched, k)
				resourceRules = append(resourceRules, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{k.Group}, APIVersions: []string{k.Version}, Resources: []string{k.Resource}},
				}})
			}
		}
	}
	if len(resourceRules) == 0 {
		return nil, nil
	}
	checker := &validating.TypeChecker{SchemaResolver: d.schemaResolver(), RestMapper: kindsMapper(matched)}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: p.GetName()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:        cel.ParamKind,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: resourceRules},
			Validations:      cel.Expressions,
			Variables:        cel.Variables,
		},
	}
	ctx := checker.CreateContext(vap)
	var warnings []string
	check := func(field, expression string) {
		if results := checker.CheckExpression(ctx, expression); len(results) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s:%s", field, strings.ReplaceAll(results.String(), "\n", ";")))
		}
	}
	for i, e := range cel.Expressions {
		field := fmt.Sprintf("spec.rules[0].validate.cel.expressions[%d]", i)
		check(field+".expression", e.Expression)
		if e.MessageExpression != "" {
			check(field+".messageExpression", e.MessageExpression)
		}
	}
	return warnings, nil
}

// convertible approximates Kyverno's CanGenerateVAP, which gates its type
// checks: a match of kinds only (no namespaces, annotations, subjects or
// roles) and at most one failure action override, naming no namespaces.
func convertible(spec *kyvernov1.Spec, rule *kyvernov1.Rule) bool {
	overrides := spec.ValidationFailureActionOverrides
	if len(overrides) > 1 || len(overrides) == 1 && len(overrides[0].Namespaces) > 0 {
		return false
	}
	m := rule.MatchResources
	filters := append(append(kyvernov1.ResourceFilters{}, m.Any...), m.All...)
	filters = append(filters, kyvernov1.ResourceFilter{ResourceDescription: m.ResourceDescription, UserInfo: m.UserInfo})
	for _, f := range filters {
		if len(f.ResourceDescription.Namespaces) > 0 || len(f.ResourceDescription.Annotations) > 0 || len(f.Subjects) > 0 || len(f.Roles) > 0 || len(f.ClusterRoles) > 0 {
			return false
		}
	}
	return true
}

// resolveResources resolves a selector among the resources themselves (no
// subresources) of the cluster, each with its resource name.
func resolveResources(c Cluster, sel match.KindSelector) ([]ServedKind, error) {
	found, err := c.Resolve(sel)
	if err != nil {
		return nil, err
	}
	out := found[:0:0]
	for _, k := range found {
		if k.Subresource == "" && k.Resource != "" {
			out = append(out, k)
		}
	}
	return out, nil
}

// schemaTTL is how long a kind's OpenAPI schema is kept: the API server's
// documents are large (core/v1's most of all) and policies are often
// written in batches; a CRD changed meanwhile is type-checked against its
// new schema a minute later at most. Only warnings depend on it.
const schemaTTL = time.Minute

// schemaResolver is d's cache of the API server's schemas.
func (d *DiscoveryCluster) schemaResolver() resolver.SchemaResolver {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.schemas == nil {
		d.schemas = &cachedSchemas{next: &resolver.ClientDiscoveryResolver{Discovery: d.client}, seen: map[schema.GroupVersionKind]cachedSchema{}}
	}
	return d.schemas
}

// cachedSchemas keeps the schemas next resolves for schemaTTL.
type cachedSchemas struct {
	next resolver.SchemaResolver
	mu   sync.Mutex
	seen map[schema.GroupVersionKind]cachedSchema
}

type cachedSchema struct {
	schema *spec.Schema
	err    error
	at     time.Time
}

// ResolveSchema implements resolver.SchemaResolver.
func (c *cachedSchemas) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.seen[gvk]; ok && time.Since(s.at) < schemaTTL {
		return s.schema, s.err
	}
	s, err := c.next.ResolveSchema(gvk)
	c.seen[gvk] = cachedSchema{schema: s, err: err, at: time.Now()}
	return s, err
}

// WithCELTypeChecks makes InCluster type-check validate.cel rules against
// the API server's schemas (CELTypeWarnings).
func (d *DiscoveryCluster) WithCELTypeChecks() *DiscoveryCluster {
	d.celTypes = true
	return d
}

// kindsMapper maps the matched resources to their kinds for the type
// checker. Resolve has already found them in d's discovery answer, so no
// second discovery of every group is made for each policy written.
func kindsMapper(kinds []ServedKind) meta.RESTMapper {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, k := range kinds {
		scope := meta.RESTScopeRoot
		if k.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		gv := schema.GroupVersion{Group: k.Group, Version: k.Version}
		mapper.AddSpecific(gv.WithKind(k.Kind), gv.WithResource(k.Resource), gv.WithResource(strings.ToLower(k.Kind)), scope)
	}
	return mapper
}
