package cpol

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/variables"
)

// What confines a namespaced kyverno.io policy (the engine root's scope.go says why) in its
// rules: compile checks and the namespace its reads and writes stay in.

// checkNamespacedRule refuses what a namespaced policy's rule names outside
// its namespace: a mutate-existing target in another namespace or of a
// cluster-scoped kind, and (through generate.Check) a generated object or
// clone source outside it. Values with variables are checked per
// evaluation instead.
func checkNamespacedRule(p *Policy, r *kyvernov1.Rule, path string, f *fault.Collector) {
	if p.namespace == "" {
		return
	}
	if r.Mutation != nil {
		for i := range r.Mutation.Targets {
			t := &r.Mutation.Targets[i]
			tp := fmt.Sprintf("%s.mutate.targets[%d]", path, i)
			if cluster, known := generate.KnownScope(t.APIVersion, t.Kind); known && cluster {
				f.Add(tp+".kind", fmt.Sprintf("a namespaced policy cannot target the cluster-scoped kind %s", t.Kind))
			}
			if t.Namespace != "" && !variables.HasVariables(t.Namespace) && t.Namespace != p.namespace {
				f.Add(tp+".namespace", fmt.Sprintf("a namespaced policy can only target its own namespace %q, not %q", p.namespace, t.Namespace))
			}
		}
	}
	for i := range r.VerifyImages {
		if c := r.VerifyImages[i].ImageRegistryCredentials; c != nil {
			loader.CheckSecretsScope(p.namespace, c.Secrets, fmt.Sprintf("%s.verifyImages[%d].imageRegistryCredentials.secrets", path, i), f)
		}
	}
	for i := range r.Context {
		if ir := r.Context[i].ImageRegistry; ir != nil && ir.ImageRegistryCredentials != nil {
			loader.CheckSecretsScope(p.namespace, ir.ImageRegistryCredentials.Secrets, fmt.Sprintf("%s.context[%d].imageRegistry.imageRegistryCredentials.secrets", path, i), f)
		}
	}
	if r.Generation != nil {
		err := generate.Check(r, generate.CheckOptions{PolicyNamespace: p.namespace})
		if faults, ok := err.(generate.Faults); ok {
			for _, g := range faults {
				if isNamespaceFault(g) {
					f.Add(path+"."+g.Field, g.Message)
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

// checkConfigMapRead refuses a namespaced policy's configMap context
// entry for another namespace: charter reads it with its own identity, so
// a tenant could otherwise read (and echo in a message or report) any
// namespace's ConfigMaps.
func checkConfigMapRead(scope, namespace string) error {
	if scope == "" || namespace == scope {
		return nil
	}
	return fmt.Errorf("a namespaced policy can only read ConfigMaps of its own namespace %q, not %q", scope, namespace)
}

// checkAPIPathRead refuses a namespaced policy's apiCall urlPath outside
// its namespace (/api/v1/namespaces/<ns>[/...] or
// /apis/<group>/<version>/namespaces/<ns>[/...]), for the same reason:
// the API server answers charter, not the tenant. Paths that could be
// read differently by the API server (.. segments, escapes) are refused
// too.
func checkAPIPathRead(scope, urlPath string) error {
	if scope == "" {
		return nil
	}
	pathPart, _, _ := strings.Cut(urlPath, "?")
	segs := strings.Split(strings.TrimPrefix(pathPart, "/"), "/")
	clean := strings.HasPrefix(pathPart, "/") && !strings.Contains(pathPart, "%")
	for _, s := range segs {
		if s == "." || s == ".." {
			clean = false
		}
	}
	var ns string
	switch {
	case !clean:
	case len(segs) >= 4 && segs[0] == "api" && segs[2] == "namespaces":
		ns = segs[3]
	case len(segs) >= 5 && segs[0] == "apis" && segs[3] == "namespaces":
		ns = segs[4]
	}
	if ns == scope {
		return nil
	}
	return fmt.Errorf("a namespaced policy can only call the API server for its own namespace %q (/api/v1/namespaces/%s/..., /apis/<group>/<version>/namespaces/%s/...), not %q",
		scope, scope, scope, urlPath)
}

// readScope is the namespace the evaluation's context reads are confined
// to: its namespaced policy's, or a namespaced CleanupPolicy's; "" for
// cluster-wide policies.
func (ev *evaluation) readScope() string {
	if ev.policy != nil {
		return ev.policy.namespace
	}
	return ev.namespace
}

// scopedObjects serves clone and cloneList sources of a namespaced policy
// from its own namespace only.
type scopedObjects struct {
	generate.ClusterObjects
	namespace string
}

func (s scopedObjects) Get(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	if namespace != s.namespace {
		return nil, celruntime.OutOfScope("clone from", s.namespace, namespace)
	}
	return s.ClusterObjects.Get(ctx, apiVersion, kind, namespace, name)
}

func (s scopedObjects) List(ctx context.Context, apiVersion, kind, namespace string, selector labels.Selector) ([]map[string]any, error) {
	if namespace != s.namespace {
		return nil, celruntime.OutOfScope("clone from", s.namespace, namespace)
	}
	return s.ClusterObjects.List(ctx, apiVersion, kind, namespace, selector)
}

// checkGeneratedScope refuses generated objects outside a namespaced
// policy's namespace (a namespace given by a variable).
func checkGeneratedScope(namespace string, objs []generate.DesiredObject) error {
	if namespace == "" {
		return nil
	}
	for _, o := range objs {
		if ns := o.Ref().Namespace; ns != namespace {
			return celruntime.OutOfScope("generate into", namespace, ns)
		}
	}
	return nil
}
