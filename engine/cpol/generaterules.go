package cpol

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// The generate rules of a kyverno.io policy: compile checks, and the
// evaluation through engine/generate.

// generateRule is a compiled generate rule.
type generateRule struct {
	// foreach are the compiled preconditions of generate.foreach entries,
	// by entry.
	foreach []*ConditionBlock
}

// compileGenerate checks a generate rule (spec §8.1): at most one of data,
// clone, cloneList or foreach (none generates the bare object), and the target's apiVersion, kind and name
// unless it is a cloneList (whose copies keep their sources' names).
func (s *Compiler) compileGenerate(r *kyvernov1.Rule, path string, f *fault.Collector) *generateRule {
	g := r.Generation
	out := &generateRule{}
	checkPattern := func(gp *kyvernov1.GeneratePattern, p string) {
		sources := 0
		if gp.RawData != nil {
			sources++
		}
		if gp.Clone.Name != "" || gp.Clone.Namespace != "" {
			sources++
			if gp.Clone.Name == "" {
				f.Add(p+".clone.name", "a clone needs the name of its source")
			}
		}
		if len(gp.CloneList.Kinds) > 0 || gp.CloneList.Namespace != "" || gp.CloneList.Selector != nil {
			sources++
			if len(gp.CloneList.Kinds) == 0 {
				f.Add(p+".cloneList.kinds", "a cloneList needs at least one kind")
			}
			if gp.CloneList.Selector != nil && !validSelector(gp.CloneList.Selector) {
				f.Add(p+".cloneList.selector", "invalid label selector")
			}
		}
		if sources > 1 {
			// None is fine: the generated object is bare (apiVersion, kind, metadata).
			f.Add(p, "a generate pattern may have only one of data, clone or cloneList")
		}
		if len(gp.CloneList.Kinds) == 0 {
			for _, fld := range []struct{ name, v string }{{"apiVersion", gp.APIVersion}, {"kind", gp.Kind}, {"name", gp.Name}} {
				if fld.v == "" {
					f.Add(p+"."+fld.name, "a generated resource needs "+fld.name)
				}
			}
		}
	}
	if len(g.ForEachGeneration) > 0 {
		if g.RawData != nil || g.Clone.Name != "" || len(g.CloneList.Kinds) > 0 {
			f.Add(path, "a generate rule may have only one of data, clone, cloneList or foreach")
		}
		for i := range g.ForEachGeneration {
			fe := &g.ForEachGeneration[i]
			fp := fmt.Sprintf("%s.foreach[%d]", path, i)
			if fe.List == "" {
				f.Add(fp+".list", "foreach needs a list expression")
			}
			s.CheckContext(fe.Context, fp+".context", f)
			out.foreach = append(out.foreach, CompileConditions(fe.AnyAllConditions, fp+".preconditions", f))
			checkPattern(&fe.GeneratePattern, fp)
		}
	} else {
		checkPattern(&g.GeneratePattern, path)
	}
	return out
}

// Generate calls engine/generate with the rule's document, the engine's
// loaders for foreach context entries and compiled preconditions, and the
// object loader for clone sources.
func (ev *evaluation) generate(ctx context.Context, doc *jsoncontext.Document, r *rule) ([]generate.DesiredObject, error) {
	policy := generate.PolicyRef{Name: ev.policy.source.GetName()}
	if ev.policy.source.IsNamespaced() {
		policy.Namespace = ev.policy.source.GetNamespace()
	}
	ref := ev.in.ResourceRef()
	meta, _ := ev.in.Object["metadata"].(map[string]any)
	uid, _ := meta["uid"].(string)
	trigger := generate.ObjectRef{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: types.UID(uid)}
	env := generate.Env{
		Elements: generate.ElementsFunc(func(ctx context.Context, edoc *jsoncontext.Document, _ int, entry *kyvernov1.ForEachGeneration) (bool, error) {
			perElement := ev.foreachValues(r)
			if err := ev.loadEntries(ctx, edoc, r, entry.Context, perElement); err != nil {
				return false, err
			}
			// engine/generate has set element and elementIndex already.
			index, _ := edoc.Get("elementIndex")
			if i, ok := index.(float64); ok {
				if err := pinElementValues(edoc, perElement, int(i)); err != nil {
					return false, err
				}
			}
			block := ev.foreachConditions(r, entry)
			ok, _, err := ev.conditions(edoc, block)
			return ok, err
		}),
	}
	if l := ev.cfg.Loaders.Objects; l != nil {
		env.Objects = clusterObjects{l}
		if ns := ev.policy.namespace; ns != "" {
			env.Objects = scopedObjects{ClusterObjects: env.Objects, namespace: ns}
		}
	}
	objs, err := generate.Generate(ctx, policy, r.src, trigger, doc, env)
	if scopeErr := checkGeneratedScope(ev.policy.namespace, objs); scopeErr != nil {
		return nil, scopeErr
	}
	return objs, err
}

// foreachConditions finds the compiled preconditions of a foreach entry.
func (ev *evaluation) foreachConditions(r *rule, entry *kyvernov1.ForEachGeneration) *ConditionBlock {
	for i := range r.src.Generation.ForEachGeneration {
		if &r.src.Generation.ForEachGeneration[i] == entry && i < len(r.generate.foreach) {
			return r.generate.foreach[i]
		}
	}
	return nil
}

// clusterObjects serves engine/generate's reads through the engine's
// ObjectLoader.
type clusterObjects struct{ l loader.ObjectLoader }

func (c clusterObjects) Get(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	q := loader.ObjectQuery{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}
	objs, err := c.l.Objects(ctx, q)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		ref := review.RefOf(o)
		if ref.APIVersion == apiVersion && ref.Kind == kind && ref.Namespace == namespace && ref.Name == name {
			return o, nil
		}
	}
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group, Resource: strings.ToLower(kind)}, name)
}

func (c clusterObjects) List(ctx context.Context, apiVersion, kind, namespace string, selector labels.Selector) ([]map[string]any, error) {
	objs, err := c.l.Objects(ctx, loader.ObjectQuery{APIVersion: apiVersion, Kind: kind, Namespace: namespace})
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, o := range objs {
		ref := review.RefOf(o)
		if ref.Kind != kind || (apiVersion != "" && ref.APIVersion != apiVersion) || (namespace != "" && ref.Namespace != namespace) {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		if selector != nil && !selector.Matches(labels.Set(review.StringMap(meta["labels"]))) {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// OldView is the view of a request's old object as the object of a
// request of its own, made on first use and shared by the policies of a
// review: a generate rule that no longer selects the new object fails
// when it selected the old one.
type OldView struct{ view *review.View }

func (o *OldView) of(ctx context.Context, req *review.Request, cfg *review.Options) *review.View {
	if o.view == nil {
		oldReq := *req
		oldReq.Object = req.OldObject
		o.view = review.NewView(ctx, &oldReq, cfg)
	}
	return o.view
}

// Generate runs the policy's generate rules for the trigger in view
// (the engine's PolicySet.Generate): their responses.
func (cp *Policy) Generate(ctx context.Context, req *review.Request, in *review.View, st *Request, old *OldView, env *Env, cfg *review.Options) []review.RuleResponse {
	var rules []review.RuleResponse
	ev := &evaluation{env: env, policy: cp, in: in, st: st, cfg: cfg, object: in.Object}
	for _, r := range cp.ruleList() {
		if r.typ != review.TypeGeneration || r.generate == nil {
			continue
		}
		rr := review.RuleResponse{Name: r.name, Type: r.typ, Properties: r.src.ReportProperties}
		matchesNew := req.Object != nil && r.selects(&in.Res)
		if !matchesNew {
			if req.OldObject == nil {
				continue
			}
			if !r.selects(&old.of(ctx, req, cfg).Res) {
				continue
			}
			rr.Status, rr.Message = review.StatusFail, "trigger no longer matches"
			rules = append(rules, rr)
			continue
		}
		doc, _, final := ev.prelude(ctx, r, &rr)
		if final != nil {
			rr.Status, rr.Message = final.Status, final.Message
			if cfg.CLIGeneration && doc != nil && final.Status == review.StatusSkip && generate.GeneratesWhenSkipped(r.src) {
				// Kyverno's CLI quirk (WithCLIGeneration): its generator
				// fails silently, so errors produce nothing here either.
				rr.Generated, _ = ev.generate(ctx, doc, r)
			}
		} else if cfg.BackgroundChecks {
			rr.Status = review.StatusPass
		} else {
			objs, err := ev.generate(ctx, doc, r)
			switch {
			case err != nil:
				rr.Status, rr.Message = review.StatusError, "failed to generate resources: "+err.Error()
			default:
				rr.Status, rr.Generated = review.StatusPass, objs
			}
		}
		rules = append(rules, rr)
		if cp.spec.GetApplyRules() == kyvernov1.ApplyOne && rr.Status != review.StatusSkip {
			break
		}
	}
	return rules
}
