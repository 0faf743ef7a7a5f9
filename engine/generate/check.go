package generate

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/variables"
)

// Fault is one problem of a generate rule. Field is the path inside the
// rule ("generate.clone.namespace"); the compiler prefixes the rule's own
// path ("spec.rules[2].").
type Fault struct {
	Field   string
	Message string
}

func (f Fault) String() string { return f.Field + ": " + f.Message }

// Faults is every fault Check found; it is the error Check returns.
type Faults []Fault

func (fs Faults) Error() string {
	msgs := make([]string, len(fs))
	for i, f := range fs {
		msgs[i] = f.String()
	}
	return strings.Join(msgs, "; ")
}

// CheckOptions configures Check.
type CheckOptions struct {
	// PolicyNamespace is the namespace of a namespaced Policy, "" for a
	// ClusterPolicy. A namespaced policy may only generate into, and clone
	// from, its own namespace.
	PolicyNamespace string
	// Scope says whether a kind is cluster-scoped, and whether it knows.
	// Scope checks are made only for known kinds. Nil means KnownScope
	// (built-in Kubernetes and Kyverno kinds); a caller with discovery can
	// do better.
	Scope func(apiVersion, kind string) (clusterScoped, known bool)
}

// Check returns the faults of a rule's generate block
// (mutate-generate-semantics.md §8.1) as Faults, or nil:
//   - at most one of data, clone, cloneList and foreach (none: a bare object);
//   - apiVersion, kind and name set unless cloneList is used, per pattern
//     (every foreach entry is a pattern of its own, with a list);
//   - clone names its source; cloneList lists valid kinds of one scope and
//     a valid selector without wildcards;
//   - target namespace set for namespaced kinds and empty for
//     cluster-scoped ones; clone and cloneList sources of namespaced kinds
//     name their namespace;
//   - a namespaced policy stays in its namespace.
//
// Values holding variables are not scope-checked: they are known only per
// trigger.
func Check(rule *kyvernov1.Rule, opts CheckOptions) error {
	if rule == nil || rule.Generation == nil {
		return nil
	}
	if opts.Scope == nil {
		opts.Scope = KnownScope
	}
	c := &checker{opts: opts}
	g := rule.Generation
	if len(g.ForEachGeneration) == 0 {
		c.pattern("generate", &g.GeneratePattern)
	} else {
		if set := sources(&g.GeneratePattern); len(set) > 0 {
			c.add("generate", fmt.Sprintf("only one of data, clone, cloneList or foreach may be set, found foreach and %s", strings.Join(set, ", ")))
		}
		for i := range g.ForEachGeneration {
			fe := &g.ForEachGeneration[i]
			path := fmt.Sprintf("generate.foreach[%d]", i)
			if strings.TrimSpace(fe.List) == "" {
				c.add(path+".list", "required: a JMESPath expression yielding the elements")
			}
			c.pattern(path, &fe.GeneratePattern)
		}
	}
	if len(c.faults) == 0 {
		return nil
	}
	return c.faults
}

// Warnings returns what is legal but likely wrong in a generate block:
// variables in clone or cloneList (Kyverno accepts them with a warning).
func Warnings(rule *kyvernov1.Rule) []Fault {
	if rule == nil || rule.Generation == nil {
		return nil
	}
	var out []Fault
	warn := func(path string, p *kyvernov1.GeneratePattern) {
		if hasVars(p.Clone.Namespace, p.Clone.Name) {
			out = append(out, Fault{path + ".clone", "variables in clone make the source depend on the trigger"})
		}
		vars := hasVars(p.CloneList.Namespace) || hasVars(p.CloneList.Kinds...)
		if p.CloneList.Selector != nil {
			if v, err := toJSONValue(p.CloneList.Selector); err == nil && variables.HasVariables(v) {
				vars = true
			}
		}
		if vars {
			out = append(out, Fault{path + ".cloneList", "variables in cloneList make the sources depend on the trigger"})
		}
	}
	warn("generate", &rule.Generation.GeneratePattern)
	for i := range rule.Generation.ForEachGeneration {
		warn(fmt.Sprintf("generate.foreach[%d]", i), &rule.Generation.ForEachGeneration[i].GeneratePattern)
	}
	return out
}

type checker struct {
	opts   CheckOptions
	faults Faults
}

func (c *checker) add(field, msg string) { c.faults = append(c.faults, Fault{field, msg}) }

// sources lists which of data, clone and cloneList a pattern sets.
func sources(p *kyvernov1.GeneratePattern) []string {
	var set []string
	if p.RawData != nil {
		set = append(set, "data")
	}
	if p.Clone != (kyvernov1.CloneFrom{}) {
		set = append(set, "clone")
	}
	if len(p.CloneList.Kinds) > 0 || p.CloneList.Namespace != "" || p.CloneList.Selector != nil {
		set = append(set, "cloneList")
	}
	return set
}

func (c *checker) pattern(path string, p *kyvernov1.GeneratePattern) {
	set := sources(p)
	switch {
	case len(set) == 0:
		// Neither data nor clone: the generated object is bare, apiVersion,
		// kind and metadata, as in Kyverno.
		c.identity(path, p)
		c.targetScope(path, p.APIVersion, p.Kind, p.Namespace)
		return
	case len(set) > 1:
		what := "data, clone, cloneList or foreach"
		if path != "generate" {
			what = "data, clone or cloneList"
		}
		c.add(path, fmt.Sprintf("only one of %s may be set, found %s", what, strings.Join(set, " and ")))
		return
	}
	switch set[0] {
	case "data":
		c.identity(path, p)
		if v, err := kyvernov1.FromJSON(p.RawData); err != nil {
			c.add(path+".data", err.Error())
		} else if m, ok := v.(map[string]any); !ok && !isVariable(v) {
			c.add(path+".data", fmt.Sprintf("must be an object, got %s", jsoncontext.KindOf(v)))
		} else if k, _ := m["kind"].(string); ok && c.opts.PolicyNamespace != "" && k != "" && k != p.Kind && !hasVars(k, p.Kind) {
			c.add(path+".data.kind", fmt.Sprintf("a namespaced policy generates only the kind its rule declares, %s, not %s", p.Kind, k))
		}
		c.targetScope(path, p.APIVersion, p.Kind, p.Namespace)
	case "clone":
		c.identity(path, p)
		if p.Clone.Name == "" {
			c.add(path+".clone.name", "required: the name of the object to clone")
		}
		c.targetScope(path, p.APIVersion, p.Kind, p.Namespace)
		c.sourceNamespace(path+".clone.namespace", p.Clone.Namespace, []typeRef{{p.APIVersion, p.Kind}})
	case "cloneList":
		c.cloneList(path, p)
	}
}

// identity checks the target fields every non-cloneList pattern needs.
func (c *checker) identity(path string, p *kyvernov1.GeneratePattern) {
	if p.APIVersion == "" {
		c.add(path+".apiVersion", "required: the apiVersion of the generated object")
	}
	if p.Kind == "" {
		c.add(path+".kind", "required: the kind of the generated object")
	}
	if p.Name == "" {
		c.add(path+".name", "required: the name of the generated object")
	}
}

type typeRef struct{ apiVersion, kind string }

func (c *checker) cloneList(path string, p *kyvernov1.GeneratePattern) {
	cl := &p.CloneList
	if len(cl.Kinds) == 0 {
		c.add(path+".cloneList.kinds", "required: the kinds to clone, as apiVersion/Kind")
		return
	}
	var kinds []typeRef
	for i, k := range cl.Kinds {
		apiVersion, kind, err := parseKind(k)
		if err != nil {
			c.add(fmt.Sprintf("%s.cloneList.kinds[%d]", path, i), err.Error())
			continue
		}
		kinds = append(kinds, typeRef{apiVersion, kind})
	}
	if cl.Selector != nil {
		if selectorHasWildcards(cl.Selector) {
			c.add(path+".cloneList.selector", "wildcard characters * and ? are not supported in a label selector")
		} else if _, err := metav1.LabelSelectorAsSelector(cl.Selector); err != nil && !selectorHasVars(cl.Selector) {
			c.add(path+".cloneList.selector", err.Error())
		}
	}
	scopes := map[bool][]string{}
	for _, k := range kinds {
		if cluster, known := c.scope(k.apiVersion, k.kind); known {
			scopes[cluster] = append(scopes[cluster], k.kind)
		}
	}
	if len(scopes[true]) > 0 && len(scopes[false]) > 0 {
		c.add(path+".cloneList.kinds", fmt.Sprintf("kinds of mixed scope: %s cluster-scoped, %s namespaced",
			strings.Join(scopes[true], ", "), strings.Join(scopes[false], ", ")))
		return
	}
	// The clones keep their kinds: the target namespace must fit them. One
	// kind of known scope decides (a mixed list is a fault already).
	target := typeRef{}
	for _, k := range kinds {
		if _, known := c.scope(k.apiVersion, k.kind); known {
			target = k
			break
		}
	}
	c.targetScope(path, target.apiVersion, target.kind, p.Namespace)
	c.sourceNamespace(path+".cloneList.namespace", cl.Namespace, kinds)
}

func (c *checker) scope(apiVersion, kind string) (cluster, known bool) {
	if hasVars(apiVersion, kind) || kind == "" {
		return false, false
	}
	return c.opts.Scope(apiVersion, kind)
}

// targetScope checks generate.namespace against the target kind's scope and
// the policy's namespace.
func (c *checker) targetScope(path, apiVersion, kind, namespace string) {
	field := path + ".namespace"
	cluster, known := c.scope(apiVersion, kind)
	switch {
	case known && cluster && c.opts.PolicyNamespace != "":
		c.add(field, fmt.Sprintf("a namespaced policy cannot generate the cluster-scoped kind %s", kind))
	case known && cluster && namespace != "":
		c.add(field, fmt.Sprintf("must be empty: %s is cluster-scoped", kind))
	case known && !cluster && namespace == "":
		c.add(field, fmt.Sprintf("required: %s is namespaced", kind))
	case c.opts.PolicyNamespace != "" && namespace != "" && !hasVars(namespace) && namespace != c.opts.PolicyNamespace:
		c.add(field, fmt.Sprintf("a namespaced policy can only generate into its own namespace %q, not %q", c.opts.PolicyNamespace, namespace))
	}
}

// sourceNamespace checks the namespace of clone or cloneList sources.
func (c *checker) sourceNamespace(field, namespace string, kinds []typeRef) {
	if c.opts.PolicyNamespace != "" && !hasVars(namespace) && namespace != c.opts.PolicyNamespace {
		c.add(field, fmt.Sprintf("a namespaced policy can only clone from its own namespace %q, not %q", c.opts.PolicyNamespace, namespace))
		return
	}
	for _, k := range kinds {
		cluster, known := c.scope(k.apiVersion, k.kind)
		switch {
		case known && !cluster && namespace == "":
			c.add(field, fmt.Sprintf("required: %s is namespaced", k.kind))
			return
		case known && cluster && namespace != "":
			c.add(field, fmt.Sprintf("must be empty: %s is cluster-scoped", k.kind))
			return
		}
	}
}

func hasVars(ss ...string) bool {
	for _, s := range ss {
		if variables.HasVariables(s) {
			return true
		}
	}
	return false
}

func isVariable(v any) bool {
	s, ok := v.(string)
	return ok && variables.HasVariables(s)
}

func selectorHasVars(sel *metav1.LabelSelector) bool {
	v, err := toJSONValue(sel)
	return err == nil && variables.HasVariables(v)
}

func selectorHasWildcards(sel *metav1.LabelSelector) bool {
	wild := func(s string) bool { return strings.ContainsAny(s, "*?") }
	for k, v := range sel.MatchLabels {
		if wild(k) || wild(v) {
			return true
		}
	}
	for _, e := range sel.MatchExpressions {
		if wild(e.Key) {
			return true
		}
		for _, v := range e.Values {
			if wild(v) {
				return true
			}
		}
	}
	return false
}

// KnownScope knows the scope of the built-in Kubernetes kinds and of
// Kyverno's and charter's own kinds; it says nothing about others.
func KnownScope(apiVersion, kind string) (clusterScoped, known bool) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return false, false
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: kind}
	if apiVersion == "" {
		// cloneList kinds may name no version: go by kind alone, for kinds
		// whose name is unambiguous among the built-ins.
		for known, cluster := range scopes {
			if known.Kind == kind {
				return cluster, true
			}
		}
		return false, false
	}
	cluster, ok := scopes[gk]
	return cluster, ok
}

// KnownResourceScope is KnownScope for a resource (a kind's plural, as
// resource gives it), as a CEL policy's resource rules name them.
func KnownResourceScope(group, res string, resource func(kind string) string) (clusterScoped, known bool) {
	for gk, cluster := range scopes {
		if gk.Group == group && resource(gk.Kind) == res {
			return cluster, true
		}
	}
	return false, false
}

// scopes maps built-in kinds to whether they are cluster-scoped.
// KnownKindForResource is the built-in kind of a group's resource (a
// kind's plural, as resource gives it); false for a resource that is not
// built in.
func KnownKindForResource(group, res string, resource func(kind string) string) (string, bool) {
	for gk := range scopes {
		if gk.Group == group && resource(gk.Kind) == res {
			return gk.Kind, true
		}
	}
	return "", false
}

var scopes = func() map[schema.GroupKind]bool {
	m := map[schema.GroupKind]bool{}
	add := func(group string, cluster bool, kinds ...string) {
		for _, k := range kinds {
			m[schema.GroupKind{Group: group, Kind: k}] = cluster
		}
	}
	add("", true, "Namespace", "Node", "PersistentVolume", "ComponentStatus")
	add("", false, "ConfigMap", "Secret", "Pod", "Service", "ServiceAccount", "Endpoints", "Event",
		"LimitRange", "ResourceQuota", "PersistentVolumeClaim", "PodTemplate", "ReplicationController")
	add("apps", false, "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ControllerRevision")
	add("batch", false, "Job", "CronJob")
	add("autoscaling", false, "HorizontalPodAutoscaler")
	add("policy", false, "PodDisruptionBudget")
	add("networking.k8s.io", false, "NetworkPolicy", "Ingress")
	add("networking.k8s.io", true, "IngressClass", "IPAddress", "ServiceCIDR")
	add("discovery.k8s.io", false, "EndpointSlice")
	add("coordination.k8s.io", false, "Lease")
	add("events.k8s.io", false, "Event")
	add("rbac.authorization.k8s.io", false, "Role", "RoleBinding")
	add("rbac.authorization.k8s.io", true, "ClusterRole", "ClusterRoleBinding")
	add("storage.k8s.io", true, "StorageClass", "CSIDriver", "CSINode", "VolumeAttachment", "VolumeAttributesClass")
	add("storage.k8s.io", false, "CSIStorageCapacity")
	add("scheduling.k8s.io", true, "PriorityClass")
	add("node.k8s.io", true, "RuntimeClass")
	add("apiextensions.k8s.io", true, "CustomResourceDefinition")
	add("apiregistration.k8s.io", true, "APIService")
	add("admissionregistration.k8s.io", true, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
	add("certificates.k8s.io", true, "CertificateSigningRequest")
	add("flowcontrol.apiserver.k8s.io", true, "FlowSchema", "PriorityLevelConfiguration")
	add("kyverno.io", true, "ClusterPolicy", "ClusterCleanupPolicy")
	add("kyverno.io", false, "Policy", "PolicyException", "CleanupPolicy", "UpdateRequest")
	add("wgpolicyk8s.io", true, "ClusterPolicyReport")
	add("wgpolicyk8s.io", false, "PolicyReport")
	add("openreports.io", true, "ClusterReport")
	add("openreports.io", false, "Report")
	return m
}()
