package celruntime

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/charter-dev/charter/engine/review"
)

// Constraints are compiled matchConstraints (cel-policy-types.md §3.2):
// namespaceSelector, objectSelector, excludeResourceRules, resourceRules.
type Constraints struct {
	Src               *admissionregistrationv1.MatchResources
	namespaceSelector labels.Selector
	objectSelector    labels.Selector
}

// CompileConstraints compiles a policy's matchConstraints.
func CompileConstraints(mc *admissionregistrationv1.MatchResources) (*Constraints, error) {
	if mc == nil || len(mc.ResourceRules) == 0 {
		return nil, fmt.Errorf("a matchConstraints with at least one resource rule is required")
	}
	c := &Constraints{Src: mc, namespaceSelector: labels.Everything(), objectSelector: labels.Everything()}
	var err error
	if mc.NamespaceSelector != nil {
		if c.namespaceSelector, err = metav1.LabelSelectorAsSelector(mc.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	if mc.ObjectSelector != nil {
		if c.objectSelector, err = metav1.LabelSelectorAsSelector(mc.ObjectSelector); err != nil {
			return nil, fmt.Errorf("objectSelector: %w", err)
		}
	}
	return c, nil
}

// Matches reports whether the request is one the constraints select.
func (c *Constraints) Matches(in *review.View) bool {
	if c == nil {
		return false
	}
	gvr := in.Resource()
	if !c.namespaceSelector.Empty() && in.Res.Namespace != "" {
		if !c.namespaceSelector.Matches(labels.Set(in.NamespaceLabelsOrName())) {
			return false
		}
	} else if !c.namespaceSelector.Empty() && in.GVK.Group == "" && in.GVK.Kind == "Namespace" {
		// A Namespace is judged by its own labels.
		if !c.namespaceSelector.Matches(labels.Set(in.Res.Labels)) {
			return false
		}
	}
	if !c.objectSelector.Empty() {
		ok := in.Req.Object != nil && c.objectSelector.Matches(labels.Set(objectLabels(in.Req.Object)))
		if !ok && in.Req.OldObject != nil {
			ok = c.objectSelector.Matches(labels.Set(objectLabels(in.Req.OldObject)))
		}
		if !ok {
			return false
		}
	}
	for i := range c.Src.ExcludeResourceRules {
		if ruleSelects(&c.Src.ExcludeResourceRules[i], in, gvr) {
			return false
		}
	}
	for i := range c.Src.ResourceRules {
		if ruleSelects(&c.Src.ResourceRules[i], in, gvr) {
			return true
		}
	}
	return false
}

func objectLabels(obj map[string]any) map[string]string {
	meta, _ := obj["metadata"].(map[string]any)
	return review.StringMap(meta["labels"])
}

func ruleSelects(r *admissionregistrationv1.NamedRuleWithOperations, in *review.View, gvr schema.GroupVersionResource) bool {
	if !anyOf(r.APIGroups, gvr.Group) || !anyOf(r.APIVersions, gvr.Version) {
		return false
	}
	if !resourceListed(r.Resources, gvr.Resource, in.Req.SubResource) {
		return false
	}
	if len(r.Operations) > 0 {
		ok := false
		for _, op := range r.Operations {
			if op == admissionregistrationv1.OperationAll || string(op) == string(in.Op) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if r.Scope != nil {
		switch *r.Scope {
		case admissionregistrationv1.ClusterScope:
			if in.Res.Namespace != "" {
				return false
			}
		case admissionregistrationv1.NamespacedScope:
			if in.Res.Namespace == "" {
				return false
			}
		}
	}
	if len(r.ResourceNames) > 0 {
		name := in.Res.Name
		if name == "" {
			// Kyverno accepts a generateName that starts with a listed
			// name.
			meta, _ := in.Object["metadata"].(map[string]any)
			gen, _ := meta["generateName"].(string)
			for _, n := range r.ResourceNames {
				if gen != "" && strings.HasPrefix(gen, n) {
					return true
				}
			}
			return false
		}
		return slices.Contains(r.ResourceNames, name)
	}
	return true
}

func anyOf(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

// resourceListed applies VAP's resource syntax: "pods", "pods/exec",
// "*", "*/scale", "pods/*".
func resourceListed(list []string, resource, sub string) bool {
	for _, r := range list {
		res, s, hasSub := strings.Cut(r, "/")
		if !hasSub {
			if sub == "" && (res == "*" || res == resource) {
				return true
			}
			continue
		}
		if (res == "*" || res == resource) && (s == "*" || s == sub) {
			return true
		}
	}
	return false
}
