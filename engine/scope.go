package engine

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/variables"
)

// A namespaced policy (kyverno.io/v1 Policy, and any later namespaced
// policy kind) acts only in its own namespace. Namespace owners may write
// such policies, so anything else would let one tenant block or rewrite
// every other tenant's workloads. The engine decides it, so the CLI,
// admission, the reports controller and every later controller agree:
//
//   - a request is seen by a namespaced policy only when its object (and
//     its old object) is in the policy's namespace; a cluster-scoped
//     object, a Namespace included, never is (Kyverno's
//     checkNamespacedPolicy in pkg/engine/internal);
//   - a mutate-existing target or a generated object outside the
//     namespace is refused when the policy is compiled, with the field
//     path, when the rule names it outright, and is an error result when
//     a variable resolves there;
//   - mutate-existing targets are looked up in the policy's namespace
//     only (targetQuery), and clone sources are read from it only.

// Namespace returns the namespace the policy acts in: its own for a
// namespaced policy, "" for a cluster-wide one.
func (p *Policy) Namespace() string { return p.namespace }

// InScope reports whether the policy may act on an object in namespace
// ("" for a cluster-scoped object). Controllers that pick the objects to
// evaluate themselves (lists, cleanup) use it; evaluation checks it
// already.
func (p *Policy) InScope(namespace string) bool {
	return p.namespace == "" || (namespace != "" && namespace == p.namespace)
}

// scopes reports whether the policy may see the request.
func (p *Policy) scopes(in *requestView) bool { return p.InScope(in.scope) }

// scopeNamespace is the namespace a request acts in, as namespaced
// policies are scoped: the namespace of the object and of the old object,
// which must agree, falling back to the request's namespace for objects
// that carry none (a subresource's options, a CREATE decoded before the
// API server defaulted it). A Namespace object, like every cluster-scoped
// object, acts in none: "" (the API server puts a Namespace's own name in
// the request's namespace field on some operations).
func scopeNamespace(req *Request, gvk schema.GroupVersionKind) string {
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		return ""
	}
	ns := ""
	for _, obj := range []map[string]any{req.Object, req.OldObject} {
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		own, _ := meta["namespace"].(string)
		if own == "" {
			own = req.Namespace
		}
		if own == "" || (ns != "" && own != ns) {
			return ""
		}
		ns = own
	}
	if ns == "" {
		ns = req.Namespace
	}
	return ns
}

// checkNamespacedRule refuses what a namespaced policy's rule names outside
// its namespace: a mutate-existing target in another namespace or of a
// cluster-scoped kind, and (through generate.Check) a generated object or
// clone source outside it. Values with variables are checked per
// evaluation instead.
func checkNamespacedRule(p *Policy, r *kyvernov1.Rule, path string, f *faults) {
	if p.namespace == "" {
		return
	}
	if r.Mutation != nil {
		for i := range r.Mutation.Targets {
			t := &r.Mutation.Targets[i]
			tp := fmt.Sprintf("%s.mutate.targets[%d]", path, i)
			if cluster, known := generate.KnownScope(t.APIVersion, t.Kind); known && cluster {
				f.add(tp+".kind", fmt.Sprintf("a namespaced policy cannot target the cluster-scoped kind %s", t.Kind))
			}
			if t.Namespace != "" && !variables.HasVariables(t.Namespace) && t.Namespace != p.namespace {
				f.add(tp+".namespace", fmt.Sprintf("a namespaced policy can only target its own namespace %q, not %q", p.namespace, t.Namespace))
			}
		}
	}
	if r.Generation != nil {
		err := generate.Check(r, generate.CheckOptions{PolicyNamespace: p.namespace})
		if faults, ok := err.(generate.Faults); ok {
			for _, g := range faults {
				if isNamespaceFault(g) {
					f.add(path+"."+g.Field, g.Message)
				}
			}
		}
	}
}

// isNamespaceFault picks, of generate.Check's faults, those about a
// namespaced policy leaving its namespace; the rest of the generate block
// is compileGenerate's to check, for every policy alike.
func isNamespaceFault(g generate.Fault) bool {
	return strings.HasPrefix(g.Message, "a namespaced policy")
}

// scopedObjects serves clone and cloneList sources of a namespaced policy
// from its own namespace only.
type scopedObjects struct {
	generate.ClusterObjects
	namespace string
}

func (s scopedObjects) Get(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	if namespace != s.namespace {
		return nil, outOfScope("clone from", s.namespace, namespace)
	}
	return s.ClusterObjects.Get(ctx, apiVersion, kind, namespace, name)
}

func (s scopedObjects) List(ctx context.Context, apiVersion, kind, namespace string, selector labels.Selector) ([]map[string]any, error) {
	if namespace != s.namespace {
		return nil, outOfScope("clone from", s.namespace, namespace)
	}
	return s.ClusterObjects.List(ctx, apiVersion, kind, namespace, selector)
}

// checkGeneratedScope refuses generated objects outside a namespaced
// policy's namespace (a namespace given by a variable).
func checkGeneratedScope(namespace string, objs []GeneratedObject) error {
	if namespace == "" {
		return nil
	}
	for _, o := range objs {
		if ns := o.Ref().Namespace; ns != namespace {
			return outOfScope("generate into", namespace, ns)
		}
	}
	return nil
}

func outOfScope(verb, own, other string) error {
	if other == "" {
		return fmt.Errorf("a namespaced policy cannot %s the cluster scope; it acts in namespace %q only", verb, own)
	}
	return fmt.Errorf("a namespaced policy can only %s its own namespace %q, not %q", verb, own, other)
}
