// Package cleanup is the cleanup kinds' contract: a compiled
// ClusterCleanupPolicy, CleanupPolicy (kyverno.io/v2), DeletingPolicy or
// NamespacedDeletingPolicy (Compile, Policy: its schedule, the kinds or
// resources it lists, dry run) and a run of it (Prepare, Run: the
// context loaded once, the decision on each object listed, the run's
// exceptions). The cleanup controller schedules and runs it; policy
// admission and the GitOps check compile through it (clusterstate/
// policycheck), so what is admitted is what runs. A namespaced policy
// reads, and deletes, in its own namespace only.
package cleanup

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/celschema"
	"github.com/charter-dev/charter/engine/cpol"
	"github.com/charter-dev/charter/engine/dpol"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/schedule"
	"github.com/charter-dev/charter/engine/wildcard"
)

// dryRunAnnotation set to "true" on a cleanup policy makes the controller
// report what the policy would delete instead of deleting it.
const dryRunAnnotation = "charter.dev/dry-run"

// maxPolicyNameLength is the longest name Kyverno admits for a cleanup
// policy (api/kyverno/v1 ValidatePolicyName): the name is a label value.
const maxPolicyNameLength = 63

// Policy is a compiled CleanupPolicy or ClusterCleanupPolicy: its
// schedule, the kinds it lists and what it deletes of them. It is
// immutable and safe for concurrent use.
type Policy struct {
	source   kyvernov2.CleanupPolicyInterface
	key      string
	schedule schedule.Schedule
	match    kyvernov1.MatchResources
	exclude  kyvernov1.MatchResources
	cond     *cpol.ConditionBlock
	context  []kyvernov1.ContextEntry
	kinds    []string
	dryRun   bool
	jp       *jmespath.Interpreter
	// dpol is set for a DeletingPolicy or NamespacedDeletingPolicy, which
	// selects with CEL instead of match, exclude and conditions (engine/dpol).
	dpol *dpol.Policy
}

// cleanupPolicyKey names a cleanup policy: "<name>" for a
// ClusterCleanupPolicy, "<namespace>/<name>" for a CleanupPolicy.
func cleanupPolicyKey(p kyvernov2.CleanupPolicyInterface) string {
	if p.IsNamespaced() {
		return p.GetNamespace() + "/" + p.GetName()
	}
	return p.GetName()
}

// Compile checks a cleanup policy and compiles it. The error,
// a fault.List, names every fault with its field path, e.g.
//
//	ClusterCleanupPolicy "x": spec.schedule: invalid schedule "61 * * * *": ...
//
// Admission (/policyvalidate) and the cleanup controller both compile
// through here, so the schedule that is admitted is the one that runs.
func Compile(src kyvernov2.CleanupPolicyInterface) (*Policy, error) {
	if dp, ok := src.(policiesv1.DeletingPolicyLike); ok {
		if errs := celschema.Faults(dp, cleanupPolicyKey(dp)); len(errs) > 0 {
			return nil, errs
		}
		return compileDeletingPolicy(dp)
	}
	spec := src.GetSpec()
	p := &Policy{source: src, key: cleanupPolicyKey(src), context: spec.Context, jp: jmespath.New()}
	f := &fault.Collector{Kind: src.GetKind(), Name: p.key}
	p.compileSchedule(spec.Schedule, f)
	checkCleanupSpec(src, f)

	p.match = withoutOperations(spec.MatchResources.V1())
	p.exclude = withoutOperations(spec.ExcludeResources.V1())
	if spec.MatchResources.IsEmpty() {
		f.Add("spec.match", "a cleanup policy needs match with at least one resource filter")
	}
	// match, context and the expressions get the checks of a policy's
	// rules; here the rule compiler reads only its JMESPath interpreter.
	rc := &cpol.Compiler{JP: p.jp}
	rc.CheckMatch("spec.match", &p.match, false, f)
	rc.CheckMatch("spec.exclude", &p.exclude, false, f)
	p.kinds = checkCleanupFilters(src, spec, f)
	if spec.ExcludeResources != nil {
		for i := range spec.ExcludeResources.Any {
			for j := range spec.MatchResources.Any {
				if reflect.DeepEqual(spec.ExcludeResources.Any[i], spec.MatchResources.Any[j]) {
					f.Add(fmt.Sprintf("spec.exclude.any[%d]", i), fmt.Sprintf("excludes exactly what spec.match.any[%d] matches: the policy would match an empty set", j))
				}
			}
		}
	}

	rc.CheckContext(spec.Context, "spec.context", f)
	for i, e := range spec.Context {
		switch {
		case e.ConfigMap != nil:
			f.Add(fmt.Sprintf("spec.context[%d].configMap", i), "ConfigMap is not allowed in CleanUp Policy")
		case e.ImageRegistry != nil:
			f.Add(fmt.Sprintf("spec.context[%d].imageRegistry", i), "ImageRegistry is not allowed in CleanUp Policy")
		}
	}
	p.cond = cpol.CompileConditions(spec.Conditions, "spec.conditions", f)
	if raw, err := cleanupJSON(spec); err == nil {
		rc.CheckExpressions(raw, "spec", f)
	}
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	return p, nil
}

// checkCleanupFilters checks what only cleanup policies forbid and returns
// the kind selectors to list. A cleanup policy lists the kinds its match
// names, so each filter must name kinds, without wildcards; user
// information is for admission requests, which cleanup has none of; and a
// namespaced policy may not name namespaces, as it acts only in its own.
func checkCleanupFilters(src kyvernov2.CleanupPolicyInterface, spec *kyvernov2.CleanupPolicySpec, f *fault.Collector) []string {
	var kinds []string
	check := func(path string, filters kyvernov1.ResourceFilters, isMatch bool) {
		for i := range filters {
			p := fmt.Sprintf("%s[%d]", path, i)
			u, d := &filters[i].UserInfo, &filters[i].ResourceDescription
			cpol.CheckNoUserInfo(u, p, "a cleanup policy has no request to take it from", f)
			if d.Name != "" && len(d.Names) > 0 {
				f.Add(p+".resources", "use either name or names, not both")
			}
			if src.IsNamespaced() && len(d.Namespaces) > 0 {
				f.Add(p+".resources.namespaces", "a namespaced CleanupPolicy acts only in its own namespace and cannot name namespaces")
			}
			if !isMatch {
				continue
			}
			if len(d.Kinds) == 0 {
				f.Add(p+".resources.kinds", "a cleanup policy must name the kinds it deletes")
			}
			for j, k := range d.Kinds {
				if wildcard.ContainsWildcard(k) {
					f.Add(fmt.Sprintf("%s.resources.kinds[%d]", p, j), fmt.Sprintf("kind %q: a cleanup policy must name the kinds it deletes, without wildcards", k))
					continue
				}
				if ks := match.ParseKind(k); ks.SubResource != "" {
					f.Add(fmt.Sprintf("%s.resources.kinds[%d]", p, j), fmt.Sprintf("kind %q: subresources cannot be deleted", k))
					continue
				}
				if !containsString(kinds, k) {
					kinds = append(kinds, k)
				}
			}
		}
	}
	check("spec.match.any", spec.MatchResources.Any, true)
	check("spec.match.all", spec.MatchResources.All, true)
	if e := spec.ExcludeResources; e != nil {
		check("spec.exclude.any", e.Any, false)
		check("spec.exclude.all", e.All, false)
	}
	return kinds
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// withoutOperations drops the operations of every filter: Kyverno accepts
// them in cleanup policies and ignores them, and there is no request
// whose operation they could select.
func withoutOperations(m kyvernov1.MatchResources) kyvernov1.MatchResources {
	strip := func(in kyvernov1.ResourceFilters) kyvernov1.ResourceFilters {
		if in == nil {
			return nil
		}
		out := make(kyvernov1.ResourceFilters, len(in))
		for i := range in {
			out[i] = in[i]
			out[i].ResourceDescription.Operations = nil
		}
		return out
	}
	return kyvernov1.MatchResources{Any: strip(m.Any), All: strip(m.All)}
}

func cleanupJSON(spec *kyvernov2.CleanupPolicySpec) (map[string]any, error) {
	// Only conditions and context hold variables.
	type variableFields struct {
		Context    []kyvernov1.ContextEntry    `json:"context,omitempty"`
		Conditions *kyvernov1.AnyAllConditions `json:"conditions,omitempty"`
	}
	return cpol.ToJSONMap(variableFields{Context: spec.Context, Conditions: spec.Conditions})
}

// Source returns the policy as written.
func (p *Policy) Source() kyvernov2.CleanupPolicyInterface { return p.source }

// Key is "<name>" or "<namespace>/<name>".
func (p *Policy) Key() string { return p.key }

// Schedule is the policy's parsed schedule.
func (p *Policy) Schedule() schedule.Schedule { return p.schedule }

// Kinds are the kind selectors of match, in order and without repeats:
// the kinds a run lists.
func (p *Policy) Kinds() []string { return p.kinds }

// DryRun reports whether the policy only reports what it would delete.
func (p *Policy) DryRun() bool { return p.dryRun }

// Run is one run of a cleanup policy: its context entries, loaded
// once before the objects are looked at (as Kyverno loads them, so they
// cannot refer to the object).
type Run struct {
	policy *Policy
	// exceptions keep objects from a DeletingPolicy (WithExceptions).
	exceptions []*celruntime.Exception
	ctx        context.Context
	// opts hold the loaders, for a DeletingPolicy's CEL libraries.
	opts review.Options
	// namespace is a namespaced policy's own: the only one it deletes
	// and reads in; "" for a cluster-wide policy.
	namespace string
	// run and doc are a CleanupPolicy's context: the entries loaded in
	// doc, its conditions evaluated by run.
	run *cpol.Run
	doc *jsoncontext.Document
}

// Prepare starts a run: it loads the policy's context entries through the
// loaders, which a DeletingPolicy's CEL libraries read through too.
func (p *Policy) Prepare(ctx context.Context, loaders loader.Loaders) (*Run, error) {
	r := &Run{policy: p, ctx: ctx, opts: review.Options{Loaders: loaders}}
	if p.source.IsNamespaced() {
		r.namespace = p.source.GetNamespace()
	}
	if p.dpol != nil {
		// A DeletingPolicy has no context entries to load.
		return r, nil
	}
	r.run = cpol.NewRun(p.jp, loaders, r.namespace)
	r.doc = jsoncontext.New(p.jp, map[string]any{})
	if err := r.run.LoadContext(ctx, r.doc, p.context); err != nil {
		return nil, err
	}
	return r, nil
}

// Object is what a run decides on: the object as listed, its kind,
// and the labels of its namespace (read only when a namespaceSelector
// needs them).
type Object struct {
	Object map[string]any
	Kind   schema.GroupVersionKind
	// Resource is the object's resource, which a DeletingPolicy's
	// resource rules select (by Kubernetes' naming conventions when
	// empty).
	Resource        schema.GroupVersionResource
	NamespaceLabels func() map[string]string
}

// Selects reports whether the policy deletes the object: a namespaced
// policy only in its own namespace, match selects it, exclude does not,
// and the conditions hold (with target, request.namespace and images set
// as Kyverno sets them). An error means the conditions could not be
// evaluated: the object is kept.
func (r *Run) Selects(o Object) (bool, error) {
	meta, _ := o.Object["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	if !review.InScope(r.namespace, namespace) {
		return false, nil
	}
	if r.policy.dpol != nil {
		return r.selectsCEL(o, namespace)
	}
	res := match.Resource{
		Kind: o.Kind, Name: name, Namespace: namespace,
		Labels: review.StringMap(meta["labels"]), Annotations: review.StringMap(meta["annotations"]),
		NamespaceLabels: o.NamespaceLabels,
	}
	if !match.Selects(&r.policy.match, &r.policy.exclude, &res) {
		return false, nil
	}
	if r.policy.cond == nil {
		return true, nil
	}
	doc := r.doc.Child()
	doc.SetRoot("target", o.Object)
	doc.SetRoot("request", map[string]any{"namespace": namespace})
	if images := jsoncontext.Images(o.Object); images != nil {
		doc.SetRoot("images", images)
	}
	ok, err := r.run.Conditions(doc, r.policy.cond)
	if err != nil {
		return false, fmt.Errorf("conditions of %s %s: %w", r.policy.source.GetKind(), r.policy.key, err)
	}
	return ok, nil
}

// String names the policy for logs.
func (p *Policy) String() string {
	return strings.TrimSpace(p.source.GetKind() + " " + p.key)
}

// compileDeletingPolicy compiles a DeletingPolicy into a Policy the
// cleanup controller schedules like a CleanupPolicy.
func compileDeletingPolicy(src policiesv1.DeletingPolicyLike) (*Policy, error) {
	spec := src.GetDeletingPolicySpec()
	p := &Policy{source: src, key: cleanupPolicyKey(src)}
	f := &fault.Collector{Kind: src.GetKind(), Name: p.key}
	p.compileSchedule(spec.Schedule, f)
	p.dpol = dpol.Compile(spec, f)
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	return p, nil
}

// compileSchedule parses the policy's schedule and its
// charter.dev/dry-run annotation.
func (p *Policy) compileSchedule(spec string, f *fault.Collector) {
	s, err := schedule.Parse(spec)
	if err != nil {
		f.Add("spec.schedule", fmt.Sprintf("invalid schedule %q: %v", spec, err))
	}
	p.schedule = s
	p.dryRun = checkDryRun(p.source.GetAnnotations(), f)
}

// checkDryRun reads the charter.dev/dry-run annotation.
func checkDryRun(annotations map[string]string, f *fault.Collector) bool {
	switch v := annotations[dryRunAnnotation]; v {
	case "", "false":
		return false
	case "true":
		return true
	default:
		// A typo must not turn a rehearsal into deletions.
		f.Add("metadata.annotations["+dryRunAnnotation+"]", fmt.Sprintf("%q is neither \"true\" nor \"false\"", v))
		return false
	}
}

// Resources are the resources a DeletingPolicy lists (group and version
// may be "*"); nil for a CleanupPolicy, which names kinds (Kinds).
func (p *Policy) Resources() []schema.GroupVersionResource {
	if p.dpol == nil {
		return nil
	}
	return p.dpol.Resources()
}

// selectsCEL decides on an object for a DeletingPolicy: matchConstraints
// (namespaceSelector, objectSelector, resource rules), then the variables
// and conditions; all true deletes it.
func (r *Run) selectsCEL(o Object, namespace string) (bool, error) {
	req := &review.Request{Operation: kyvernov1.Create, Object: o.Object, Kind: o.Kind, Resource: o.Resource}
	if namespace != "" && o.NamespaceLabels != nil {
		req.NamespaceLabels = o.NamespaceLabels()
		if req.NamespaceLabels == nil {
			req.NamespaceLabels = map[string]string{}
		}
	}
	own := celruntime.Owner{Source: r.policy.source, Exceptions: r.exceptions}
	return r.policy.dpol.Selects(review.NewView(r.ctx, req, &r.opts), r.namespace, namespace, r.policy.key, own)
}

// WithExceptions makes the policies.kyverno.io PolicyExceptions part of a
// DeletingPolicy's run: an object that an exception naming the policy
// exempts (its matchConditions hold; in the exception's namespace unless
// scope is ExceptionAnyNamespace) is kept. Exceptions that do not compile
// are left out and returned as the error; the run still honours the
// others.
func (r *Run) WithExceptions(exceptions []*policiesv1.PolicyException, scope celruntime.ExceptionScope) error {
	if r.policy.dpol == nil {
		return nil
	}
	var errs fault.List
	for _, src := range exceptions {
		ex, faults := celruntime.CompileException(src, scope)
		if len(faults) > 0 {
			errs = append(errs, faults...)
			continue
		}
		r.exceptions = append(r.exceptions, ex)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// checkCleanupSpec makes Kyverno's checks of a ClusterCleanupPolicy or
// CleanupPolicy that the compile does not make itself: its name fits a
// label value (ValidatePolicyName), its deletionPropagationPolicy is one
// the API server knows (the CRD's enum, judged here for the GitOps check
// and the CLI too) and each match or exclude filter's selector has
// requirements (ResourceDescription.Validate).
func checkCleanupSpec(src kyvernov2.CleanupPolicyInterface, f *fault.Collector) {
	if n := len(src.GetName()); n > maxPolicyNameLength {
		f.Add("metadata.name", fmt.Sprintf("Too long: may not be more than %d bytes, not %d", maxPolicyNameLength, n))
	}
	spec := src.GetSpec()
	if pp := spec.DeletionPropagationPolicy; pp != nil {
		switch *pp {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			f.Add("spec.deletionPropagationPolicy", fmt.Sprintf("Unsupported value %q: supported values: \"Foreground\", \"Background\", \"Orphan\"", *pp))
		}
	}
	blocks := []struct {
		path string
		m    *kyvernov2.MatchResources
	}{{"spec.match", &spec.MatchResources}, {"spec.exclude", spec.ExcludeResources}}
	for _, b := range blocks {
		if b.m == nil {
			continue
		}
		for i := range b.m.Any {
			cpol.CheckSelectorRequirements(b.m.Any[i].ResourceDescription.Selector, fmt.Sprintf("%s.any[%d].resources.selector", b.path, i), f)
		}
		for i := range b.m.All {
			cpol.CheckSelectorRequirements(b.m.All[i].ResourceDescription.Selector, fmt.Sprintf("%s.all[%d].resources.selector", b.path, i), f)
		}
	}
}
