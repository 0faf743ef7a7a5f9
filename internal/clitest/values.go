package clitest

import (
	"context"
	"maps"

	"k8s.io/apimachinery/pkg/runtime"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
)

// suiteValues answers the engine's Values hook from a suite's values
// (the `variables:` file merged with inline `values:`). It is read-only once
// built, so concurrent evaluations may share it.
type suiteValues struct {
	global   map[string]any
	policies map[string]*policyValues
}

type policyValues struct {
	resources map[string]map[string]any
	rules     map[string]*RuleValues
}

var _ engine.Values = (*suiteValues)(nil)

// newSuiteValues indexes the values. Later specs win over earlier ones, so
// inline `values:` can override the `variables:` file.
func newSuiteValues(specs ...*ValuesSpec) *suiteValues {
	v := &suiteValues{global: map[string]any{}, policies: map[string]*policyValues{}}
	for _, spec := range specs {
		if spec == nil {
			continue
		}
		maps.Copy(v.global, spec.GlobalValues)
		for _, p := range spec.Policies {
			pv := v.policies[p.Name]
			if pv == nil {
				pv = &policyValues{resources: map[string]map[string]any{}, rules: map[string]*RuleValues{}}
				v.policies[p.Name] = pv
			}
			for _, r := range p.Resources {
				if pv.resources[r.Name] == nil {
					pv.resources[r.Name] = map[string]any{}
				}
				maps.Copy(pv.resources[r.Name], r.Values)
			}
			for i := range p.Rules {
				pv.rules[p.Rules[i].Name] = &p.Rules[i]
			}
		}
	}
	return v
}

// Variables returns globalValues overlaid with the policy's values for the
// resource, looked up by resource name as Kyverno does.
func (v *suiteValues) Variables(policy kyvernov1.PolicyInterface, resource engine.ResourceRef) map[string]any {
	var perResource map[string]any
	if pv := v.policies[policy.GetName()]; pv != nil {
		perResource = pv.resources[resource.Name]
	}
	if len(perResource) == 0 {
		if len(v.global) == 0 {
			return nil
		}
		return v.global
	}
	if len(v.global) == 0 {
		return perResource
	}
	out := maps.Clone(v.global)
	maps.Copy(out, perResource)
	return out
}

// ContextEntries returns the rule's values. Kyverno's CLI sets every key of
// a rule's values as a variable before the rule's context is loaded, so keys
// may be entry names ("imageData") or dotted paths ("request.namespace").
func (v *suiteValues) ContextEntries(policy kyvernov1.PolicyInterface, rule string) map[string]any {
	if r := v.rule(policy, rule); r != nil {
		return r.Values
	}
	return nil
}

// ForeachElements returns the rule's foreachValues.
func (v *suiteValues) ForeachElements(policy kyvernov1.PolicyInterface, rule string) map[string][]any {
	if r := v.rule(policy, rule); r != nil {
		return r.ForeachValues
	}
	return nil
}

// rule finds a rule's values; autogen rules use the values of their source
// rule.
func (v *suiteValues) rule(policy kyvernov1.PolicyInterface, rule string) *RuleValues {
	pv := v.policies[policy.GetName()]
	if pv == nil {
		return nil
	}
	if r := pv.rules[rule]; r != nil {
		return r
	}
	for _, prefix := range []string{"autogen-cronjob-", "autogen-"} {
		if len(rule) > len(prefix) && rule[:len(prefix)] == prefix {
			return pv.rules[rule[len(prefix):]]
		}
	}
	return nil
}

// namespaceLabels serves namespace labels from the values file's
// namespaceSelector and namespaces lists and from Namespace objects among
// the cluster resources.
type namespaceLabels map[string]map[string]string

func (n namespaceLabels) NamespaceLabels(_ context.Context, namespace string) (map[string]string, error) {
	return n[namespace], nil
}

// namespaceSource serves namespace labels, and the values file's whole
// Namespace objects as CEL policies' namespaceObject.
type namespaceSource struct {
	namespaceLabels
	objects map[string]map[string]any
}

func (n namespaceSource) NamespaceObject(_ context.Context, namespace string) (map[string]any, error) {
	return n.objects[namespace], nil
}

// namespaceObjects returns the values files' Namespace objects by name.
func namespaceObjects(specs ...*ValuesSpec) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, spec := range specs {
		if spec == nil {
			continue
		}
		for i := range spec.Namespaces {
			ns := &spec.Namespaces[i]
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ns)
			if err != nil {
				continue
			}
			if ns.APIVersion == "" {
				obj["apiVersion"], obj["kind"] = "v1", "Namespace"
			}
			out[ns.Name] = obj
		}
	}
	return out
}

func newNamespaceLabels(specs ...*ValuesSpec) namespaceLabels {
	out := namespaceLabels{}
	for _, spec := range specs {
		if spec == nil {
			continue
		}
		for _, ns := range spec.Namespaces {
			out[ns.Name] = ns.Labels
		}
		for _, sel := range spec.NamespaceSelectors {
			out[sel.Name] = sel.Labels
		}
	}
	return out
}
