package generate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/variables"
)

// PolicyRef identifies the policy a generate rule belongs to. Namespace is
// empty for a ClusterPolicy.
type PolicyRef struct {
	Name      string
	Namespace string
}

// SourceType says where a desired object's content comes from. Controllers
// care: a policy's data change re-syncs data objects only, a clone source
// change re-syncs its clones only (mutate-generate-semantics.md §8.5).
type SourceType string

// Source types.
const (
	FromData      SourceType = "data"
	FromClone     SourceType = "clone"
	FromCloneList SourceType = "cloneList"
)

// DesiredObject is one downstream object a generate rule wants to exist,
// with what a controller needs to create it, keep it in sync and clean it
// up later.
type DesiredObject struct {
	// Object is the complete object to create or apply: apiVersion, kind,
	// metadata.name and metadata.namespace (absent for cluster-scoped
	// targets), Kyverno's generate labels (labels.go), no resourceVersion.
	Object map[string]any

	Policy  PolicyRef
	Rule    string
	Trigger ObjectRef

	From SourceType
	// Source is the object a clone was copied from (nil for data). Kyverno
	// labels the source itself with LabelCloneSource: "" before copying,
	// so that changes to it are noticed; Object already carries that label.
	Source *ObjectRef

	// Synchronize: keep the object equal to the rule's output and delete it
	// when the trigger goes away. Without it an existing object is left
	// alone.
	Synchronize bool
	// OrphanDownstreamOnPolicyDelete: with Synchronize, keep the object when
	// the policy or rule is deleted.
	OrphanDownstreamOnPolicyDelete bool
	// Reapply: apply the object (server-side) whenever the rule runs,
	// even without Synchronize, taking back the fields it sets and leaving
	// other managers' fields: a GeneratingPolicy's useServerSideApply,
	// as Kyverno does on the trigger's UPDATE (its chainsaw test
	// generating-policies/ssa/update).
	Reapply bool

	// ForEach is the position of the foreach element that produced the
	// object; nil outside generate.foreach.
	ForEach *Position
}

// Position is a generate.foreach entry and the index of the element in its
// list.
type Position struct {
	Entry   int
	Element int
}

// Ref returns the identity of the desired object.
func (d *DesiredObject) Ref() ObjectRef { return RefOf(d.Object) }

// Env is what generation reads besides the rule and its document.
type Env struct {
	// Objects supplies clone and cloneList sources. Rules that clone fail
	// without it.
	Objects ClusterObjects
	// Elements loads a foreach entry's context and evaluates its
	// preconditions; BasicElements when nil.
	Elements Elements
}

// Generate returns the downstream objects a generate rule wants for one
// trigger (mutate-generate-semantics.md §8.3).
//
// doc is the rule's context document, as the engine's rule pipeline leaves
// it: request.* for the trigger, the rule's context entries loaded, and the
// rule's preconditions already found to hold. Generate does not evaluate
// match, exclude, exceptions or rule-level preconditions.
//
// Variables are substituted in the whole pattern (apiVersion, kind, name,
// namespace, data, clone, cloneList), per element for generate.foreach.
// A clone of the target itself is skipped. Within a foreach, every element
// is processed and their errors are joined; the objects of the elements
// that succeeded are returned with the error, as Kyverno creates those
// before failing the rule.
func Generate(ctx context.Context, policy PolicyRef, rule *kyvernov1.Rule, trigger ObjectRef, doc *jsoncontext.Document, env Env) ([]DesiredObject, error) {
	if rule == nil || rule.Generation == nil {
		return nil, fmt.Errorf("rule has no generate block")
	}
	if env.Elements == nil {
		env.Elements = BasicElements{}
	}
	g := &generator{ctx: ctx, policy: policy, rule: rule.Name, spec: rule.Generation, trigger: trigger, env: env}
	if len(rule.Generation.ForEachGeneration) > 0 {
		return g.foreach(doc)
	}
	return g.pattern(doc, &rule.Generation.GeneratePattern, "/generate", nil)
}

// KindChangedError refuses a namespaced policy's data pattern whose
// data.kind differs from the kind the rule declares: Kyverno generates
// data's kind (mutate-generate-semantics.md §10, row 51), but a tenant's
// rule may write only the object it declares.
type KindChangedError struct {
	Rule string
	// Field is the JSON pointer of data.kind in the rule.
	Field          string
	Declared, Data string
}

func (e *KindChangedError) Error() string {
	return fmt.Sprintf("rule %s: %s changes the generated object's kind from %s to %s; a namespaced policy generates only the apiVersion, kind, name and namespace its rule declares",
		e.Rule, e.Field, e.Declared, e.Data)
}

// GeneratesWhenSkipped reports whether Kyverno's CLI still generates for
// the rule when its preconditions do not hold (§9.4, row 50): the CLI runs
// the generator for every generate response, and only plain patterns
// re-check the rule's preconditions there; foreach patterns do not. Only
// `charter test` should act on this; admission and the background
// controller generate for passing rules only.
func GeneratesWhenSkipped(rule *kyvernov1.Rule) bool {
	return rule != nil && rule.Generation != nil && len(rule.Generation.ForEachGeneration) > 0
}

type generator struct {
	ctx     context.Context
	policy  PolicyRef
	rule    string
	spec    *kyvernov1.Generation
	trigger ObjectRef
	env     Env
}

// foreach generates for every element of every entry, ascending.
func (g *generator) foreach(doc *jsoncontext.Document) ([]DesiredObject, error) {
	var out []DesiredObject
	var errs []error
	for i := range g.spec.ForEachGeneration {
		fe := &g.spec.ForEachGeneration[i]
		elements, err := evalList(doc, fe.List)
		if err != nil {
			errs = append(errs, fmt.Errorf("generate.foreach[%d]: failed to evaluate list %q: %w", i, fe.List, err))
			continue
		}
		path := fmt.Sprintf("/generate/foreach/%d", i)
		for j, el := range elements {
			if el == nil {
				continue
			}
			edoc := doc.Child()
			edoc.SetRoot("element", el)
			edoc.SetRoot("elementIndex", float64(j))
			edoc.SetRoot("element0", el)
			edoc.SetRoot("elementIndex0", float64(j))
			ok, err := g.env.Elements.Enter(g.ctx, edoc, i, fe)
			if err != nil {
				errs = append(errs, fmt.Errorf("generate.foreach[%d] element %d: %w", i, j, err))
				continue
			}
			if !ok {
				continue
			}
			objs, err := g.pattern(edoc, &fe.GeneratePattern, path, &Position{Entry: i, Element: j})
			out = append(out, objs...)
			if err != nil {
				errs = append(errs, fmt.Errorf("generate.foreach[%d] element %d: %w", i, j, err))
			}
		}
	}
	return out, errors.Join(errs...)
}

// evalList evaluates a foreach list expression (after substituting any
// {{ }} in it); a result that is not a list is a one-element list.
func evalList(doc *jsoncontext.Document, expr string) ([]any, error) {
	expr, err := substituteString(doc, expr)
	if err != nil {
		return nil, err
	}
	v, err := doc.Query(expr)
	if err != nil {
		return nil, err
	}
	if l, ok := v.([]any); ok {
		return l, nil
	}
	return []any{v}, nil
}

// pattern generates from one pattern: clone when clone.name is set, else
// cloneList when it lists kinds, else data (an empty object without it).
func (g *generator) pattern(doc *jsoncontext.Document, p *kyvernov1.GeneratePattern, path string, pos *Position) ([]DesiredObject, error) {
	rp, err := resolvePattern(doc, p, path)
	if err != nil {
		return nil, err
	}
	switch {
	case rp.clone.Name != "":
		obj, err := g.clone(rp, pos)
		if err != nil || obj == nil {
			return nil, err
		}
		return []DesiredObject{*obj}, nil
	case len(rp.cloneList.Kinds) > 0:
		return g.cloneList(rp, pos)
	default:
		if rp.data == nil {
			// Neither data nor clone: Kyverno generates the bare object,
			// apiVersion, kind and metadata.
			return []DesiredObject{g.desired(map[string]any{}, rp.target, FromData, nil, pos)}, nil
		}
		body, ok := rp.data.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s/data: resolved to %s, want an object", path, jsoncontext.KindOf(rp.data))
		}
		if k, _ := body["kind"].(string); k != "" && k != rp.target.Kind && g.policy.Namespace != "" {
			// Kyverno lets data.kind win (row 51); for a namespaced policy
			// the object written must be the one it declares, whose scope
			// and namespace were checked.
			return nil, &KindChangedError{Rule: g.rule, Field: path + "/data/kind", Declared: rp.target.Kind, Data: k}
		}
		obj := g.desired(deepCopyMap(body), rp.target, FromData, nil, pos)
		return []DesiredObject{obj}, nil
	}
}

// clone copies the source named by clone.namespace/name, of the target's
// apiVersion and kind.
func (g *generator) clone(rp *resolvedPattern, pos *Position) (*DesiredObject, error) {
	target := rp.target
	if rp.clone.Namespace == target.Namespace && rp.clone.Name == target.Name {
		// The target would be its own source: nothing to do.
		return nil, nil
	}
	want := ObjectRef{APIVersion: target.APIVersion, Kind: target.Kind, Namespace: rp.clone.Namespace, Name: rp.clone.Name}
	if g.env.Objects == nil {
		return nil, fmt.Errorf("cannot clone %s: no cluster objects to read the source from", want)
	}
	src, err := g.env.Objects.Get(g.ctx, want.APIVersion, want.Kind, want.Namespace, want.Name)
	if err != nil {
		return nil, fmt.Errorf("failed to get clone source %s: %w", want, err)
	}
	srcRef := want
	srcRef.UID = RefOf(src).UID
	obj := g.desired(copyForClone(src, target.Namespace), target, FromClone, &srcRef, pos)
	return &obj, nil
}

// cloneList copies every object of the listed kinds in cloneList.namespace
// that the selector matches, each under its own name into the target
// namespace. Sources already in the target namespace are skipped.
func (g *generator) cloneList(rp *resolvedPattern, pos *Position) ([]DesiredObject, error) {
	cl := rp.cloneList
	if g.env.Objects == nil {
		return nil, fmt.Errorf("cannot clone %s from namespace %q: no cluster objects to read the sources from", strings.Join(cl.Kinds, ", "), cl.Namespace)
	}
	selector := labels.Everything()
	if cl.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(cl.Selector)
		if err != nil {
			return nil, fmt.Errorf("generate.cloneList.selector: %w", err)
		}
		selector = s
	}
	var out []DesiredObject
	for _, k := range cl.Kinds {
		apiVersion, kind, err := parseKind(k)
		if err != nil {
			return out, fmt.Errorf("generate.cloneList.kinds: %w", err)
		}
		sources, err := g.env.Objects.List(g.ctx, apiVersion, kind, cl.Namespace, selector)
		if err != nil {
			return out, fmt.Errorf("failed to list clone sources %s in namespace %q: %w", k, cl.Namespace, err)
		}
		for _, src := range sources {
			ref := RefOf(src)
			if ref.Namespace == rp.target.Namespace {
				continue
			}
			target := ObjectRef{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: rp.target.Namespace, Name: ref.Name}
			if target.APIVersion == "" {
				target.APIVersion = apiVersion
			}
			srcRef := ref
			srcRef.APIVersion = target.APIVersion
			out = append(out, g.desired(copyForClone(src, target.Namespace), target, FromCloneList, &srcRef, pos))
		}
	}
	return out, nil
}

// desired finishes a generated body: target identity, labels, and the
// rule's lifecycle settings. body is owned by the result.
func (g *generator) desired(body map[string]any, target ObjectRef, from SourceType, src *ObjectRef, pos *Position) DesiredObject {
	meta := metadataOf(body)
	setOrDelete(meta, "name", target.Name)
	setOrDelete(meta, "namespace", target.Namespace)
	// A kind written in data wins over generate.kind (§8.3, row 51); the
	// apiVersion always comes from the rule.
	if k, _ := body["kind"].(string); k == "" {
		body["kind"] = target.Kind
	}
	body["apiVersion"] = target.APIVersion
	// Objects are created without a resourceVersion; an update takes the
	// live object's.
	delete(meta, "resourceVersion")
	if src != nil {
		setLabels(body, sourceLabels(*src), ownerLabels(g.policy, g.rule, g.trigger))
	} else {
		setLabels(body, ownerLabels(g.policy, g.rule, g.trigger))
	}
	return DesiredObject{
		Object:                         body,
		Policy:                         g.policy,
		Rule:                           g.rule,
		Trigger:                        g.trigger,
		From:                           from,
		Source:                         src,
		Synchronize:                    g.spec.Synchronize,
		OrphanDownstreamOnPolicyDelete: g.spec.OrphanDownstreamOnPolicyDelete,
		ForEach:                        pos,
	}
}

// copyForClone returns a copy of a clone source without the fields the API
// server owns (uid, selfLink, creationTimestamp, managedFields,
// resourceVersion), and without ownerReferences when it goes to another
// namespace, where its owners do not exist.
func copyForClone(src map[string]any, targetNamespace string) map[string]any {
	obj := deepCopyMap(src)
	meta := metadataOf(obj)
	for _, f := range []string{"uid", "selfLink", "creationTimestamp", "managedFields", "resourceVersion"} {
		delete(meta, f)
	}
	if ns, _ := meta["namespace"].(string); ns != targetNamespace {
		delete(meta, "ownerReferences")
	}
	return obj
}

// resolvedPattern is a GeneratePattern after variable substitution.
type resolvedPattern struct {
	target    ObjectRef
	data      any
	clone     kyvernov1.CloneFrom
	cloneList kyvernov1.CloneList
}

// resolvePattern substitutes variables in the whole pattern, as Kyverno
// does, and reads the result back. path is the pattern's JSON pointer in
// the rule ("/generate", "/generate/foreach/0"), used in errors.
func resolvePattern(doc *jsoncontext.Document, p *kyvernov1.GeneratePattern, path string) (*resolvedPattern, error) {
	data, err := kyvernov1.FromJSON(p.RawData)
	if err != nil {
		return nil, fmt.Errorf("%s/data: %w", path, err)
	}
	m := map[string]any{
		"apiVersion": p.APIVersion,
		"kind":       p.Kind,
		"name":       p.Name,
		"namespace":  p.Namespace,
	}
	if data != nil {
		m["data"] = data
	}
	if p.Clone != (kyvernov1.CloneFrom{}) {
		m["clone"] = map[string]any{"namespace": p.Clone.Namespace, "name": p.Clone.Name}
	}
	if len(p.CloneList.Kinds) > 0 || p.CloneList.Namespace != "" || p.CloneList.Selector != nil {
		cl, err := toJSONValue(p.CloneList)
		if err != nil {
			return nil, fmt.Errorf("%s/cloneList: %w", path, err)
		}
		m["cloneList"] = cl
	}
	out, err := variables.Substitute(m, doc, variables.WithPath(path))
	if err != nil {
		return nil, fmt.Errorf("variable substitution failed: %w", err)
	}
	m = out.(map[string]any)
	rp := &resolvedPattern{data: m["data"]}
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"apiVersion", &rp.target.APIVersion},
		{"kind", &rp.target.Kind},
		{"name", &rp.target.Name},
		{"namespace", &rp.target.Namespace},
	} {
		s, ok := m[f.key].(string)
		if !ok {
			return nil, fmt.Errorf("%s/%s: resolved to %s, want a string", path, f.key, jsoncontext.KindOf(m[f.key]))
		}
		*f.dst = s
	}
	if c, ok := m["clone"]; ok {
		if err := fromJSONValue(c, &rp.clone); err != nil {
			return nil, fmt.Errorf("%s/clone: %w", path, err)
		}
	}
	if cl, ok := m["cloneList"]; ok {
		if err := fromJSONValue(cl, &rp.cloneList); err != nil {
			return nil, fmt.Errorf("%s/cloneList: %w", path, err)
		}
	}
	return rp, nil
}

func toJSONValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}

func fromJSONValue(v any, dst any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

// metadataOf returns obj's metadata map, creating it when absent (or not a
// map).
func metadataOf(obj map[string]any) map[string]any {
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	return meta
}

// setOrDelete sets a metadata string, removing the key when it is empty,
// as unstructured.Unstructured's setters do.
func setOrDelete(meta map[string]any, key, value string) {
	if value == "" {
		delete(meta, key)
		return
	}
	meta[key] = value
}

func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopy(v)
	}
	return out
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return deepCopyMap(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}
