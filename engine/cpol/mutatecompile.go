package cpol

import (
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	sigsyaml "sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/mutate"
	"github.com/charter-dev/charter/engine/variables"
)

// mutateRule is a compiled mutate rule: exactly one of a patch, foreach
// entries, plus the targets of a mutate-existing rule.
type mutateRule struct {
	patch   *patch
	foreach []*foreachMutation
	// targets is set for mutate-existing rules (mutate.targets).
	targets []*mutateTarget
}

// patch is one patchStrategicMerge or patchesJson6902, decoded once. A
// patch with variables is substituted per evaluation; one without is used
// as is (strategic) or pre-decoded (JSON 6902).
type patch struct {
	// strategic is the decoded patchStrategicMerge; nil for a JSON patch.
	strategic any
	// json6902 is the patchesJson6902 text.
	json6902 string
	// decoded is json6902 parsed, when it has no variables.
	decoded jsonpatch.Patch
	hasVars bool
	// path is the JSON pointer of the patch within the rule, for variable
	// error messages ("/mutate/patchStrategicMerge").
	path string
}

// foreachMutation is a compiled mutate.foreach entry.
type foreachMutation struct {
	list          string
	order         *kyvernov1.ForeachOrder
	context       []kyvernov1.ContextEntry
	preconditions *ConditionBlock
	patch         *patch
	nested        []*foreachMutation
}

// descending reports the iteration order of the entry: Descending by
// default for a strategic merge patch (so prepended elements keep list
// order), Ascending otherwise, unless order says.
func (fe *foreachMutation) descending() bool {
	if fe.order != nil {
		return *fe.order == kyvernov1.Descending
	}
	return fe.patch != nil && fe.patch.strategic != nil
}

// mutateTarget is one compiled mutate.targets entry.
type mutateTarget struct {
	spec          kyvernov1.TargetSelector
	context       []kyvernov1.ContextEntry
	preconditions *ConditionBlock
}

// compileMutate checks a mutate rule (Kyverno's policy validation for
// Mutate rules, spec §3 and §4.2) and decodes its patches.
func (s *Compiler) compileMutate(r *kyvernov1.Rule, path string, f *fault.Collector) *mutateRule {
	m := r.Mutation
	out := &mutateRule{}
	forms := 0
	if m.RawPatchStrategicMerge != nil {
		forms++
		out.patch = s.compileStrategic(m.RawPatchStrategicMerge, path+".patchStrategicMerge", "/mutate/patchStrategicMerge", f)
	}
	if m.PatchesJSON6902 != "" {
		forms++
		out.patch = s.compileJSON6902(m.PatchesJSON6902, path+".patchesJson6902", "/mutate/patchesJson6902", false, f)
	}
	if len(m.ForEachMutation) > 0 {
		forms++
		out.foreach = s.compileForeachMutation(m.ForEachMutation, path+".foreach", "/mutate/foreach", f)
	}
	switch {
	case forms == 0:
		f.Add(path, "a mutate rule needs one of patchStrategicMerge, patchesJson6902 or foreach")
	case forms > 1:
		f.Add(path, "a mutate rule may have only one of patchStrategicMerge, patchesJson6902 or foreach")
	}
	for i := range m.Targets {
		t := &m.Targets[i]
		tp := fmt.Sprintf("%s.targets[%d]", path, i)
		if t.Kind == "" {
			f.Add(tp+".kind", "a target needs a kind")
		}
		if t.APIVersion == "" {
			f.Add(tp+".apiVersion", "a target needs an apiVersion")
		}
		if t.Selector != nil && !validSelector(t.Selector) {
			f.Add(tp+".selector", "invalid label selector")
		}
		s.CheckContext(t.Context, tp+".context", f)
		mt := &mutateTarget{spec: t.TargetSelector, context: t.Context}
		if t.RawAnyAllConditions != nil {
			block, err := kyvernov1.ParseConditions(t.RawAnyAllConditions)
			if err != nil {
				f.Add(tp+".preconditions", err.Error())
			} else {
				mt.preconditions = CompileConditions(block, tp+".preconditions", f)
			}
		}
		out.targets = append(out.targets, mt)
	}
	return out
}

func (s *Compiler) compileStrategic(raw *apiextv1.JSON, path, pointer string, f *fault.Collector) *patch {
	var v any
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		f.Add(path, "invalid patch: "+err.Error())
		return nil
	}
	if _, ok := v.(map[string]any); !ok {
		f.Add(path, fmt.Sprintf("a strategic merge patch must be an object, found %s", jsoncontext.KindOf(v)))
		return nil
	}
	checkLabelValues(v, path, f)
	return &patch{strategic: v, hasVars: variables.HasVariables(v), path: pointer}
}

// checkLabelValues rejects non-string label and annotation values in a
// patch: the API server would refuse the patched object. (Kyverno's check
// only looks at one of metadata and spec, picked by map order, spec §2.5
// Q7; charter always checks.)
func checkLabelValues(v any, path string, f *fault.Collector) {
	m, _ := v.(map[string]any)
	meta, _ := m["metadata"].(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		vals, _ := meta[field].(map[string]any)
		for k, val := range vals {
			if _, ok := val.(string); !ok {
				f.Add(fault.JoinPath(path+".metadata."+field, k), fmt.Sprintf("%s values must be strings, found %s", field, jsoncontext.KindOf(val)))
			}
		}
	}
}

// json6902Ops are the operations RFC 6902 defines.
var json6902Ops = map[string]bool{"add": true, "remove": true, "replace": true, "move": true, "copy": true, "test": true}

// compileJSON6902 checks the operations of a patchesJson6902. Variables
// may stand in values anywhere, and in paths only inside foreach (where
// {{elementIndex}} is the usual way to address an element), as in Kyverno.
func (s *Compiler) compileJSON6902(text, path, pointer string, inForeach bool, f *fault.Collector) *patch {
	p := &patch{json6902: text, hasVars: variables.HasVariables(text), path: pointer}
	if p.hasVars && singleVariable(strings.TrimSpace(text)) != "" {
		// The whole list comes from a variable: nothing to check before it
		// is resolved.
		return p
	}
	// Check the shape with variables standing in as plain strings: a
	// variable's value is only known per request.
	probe := []byte(neutraliseVariables(text))
	if len(probe) == 0 || probe[0] != '[' {
		var err error
		if probe, err = sigsyaml.YAMLToJSON(probe); err != nil {
			f.Add(path, "failed to convert patchesJSON6902 to JSON: "+err.Error())
			return p
		}
	}
	var ops []map[string]any
	if err := json.Unmarshal(probe, &ops); err != nil {
		f.Add(path, "a patchesJson6902 must be a list of operations: "+err.Error())
		return p
	}
	before := len(f.Errs)
	for i, op := range ops {
		opPath := fmt.Sprintf("%s[%d]", path, i)
		kind, _ := op["op"].(string)
		if !json6902Ops[kind] {
			f.Add(opPath+".op", fmt.Sprintf("unknown operation %q, want add, remove, replace, move, copy or test", kind))
			continue
		}
		target, _ := op["path"].(string)
		switch {
		case strings.Contains(target, variableStandIn):
			if !inForeach {
				f.Add(opPath+".path", "variables are not allowed in the path of a patchesJson6902 operation outside foreach")
			}
		case !strings.HasPrefix(target, "/"):
			f.Add(opPath+".path", fmt.Sprintf("path %q must start with /", target))
		}
		switch kind {
		case "add", "replace", "test":
			if _, ok := op["value"]; !ok {
				f.Add(opPath+".value", fmt.Sprintf("a %s operation needs a value", kind))
			}
		case "move", "copy":
			if from, _ := op["from"].(string); !strings.HasPrefix(from, "/") && !strings.Contains(from, variableStandIn) {
				f.Add(opPath+".from", fmt.Sprintf("a %s operation needs a from path starting with /", kind))
			}
		}
	}
	if len(f.Errs) == before && !p.hasVars {
		decoded, err := mutate.DecodeJSON6902(text)
		if err != nil {
			f.Add(path, err.Error())
			return p
		}
		p.decoded = decoded
	}
	return p
}

// variableStandIn replaces variables while a patch is parsed for its shape.
const variableStandIn = "charter-variable"

// neutraliseVariables replaces every {{...}} with variableStandIn, so the
// text can be parsed for its shape.
func neutraliseVariables(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(variableStandIn)
		s = s[i+j+2:]
	}
}

func (s *Compiler) compileForeachMutation(list []kyvernov1.ForEachMutation, path, pointer string, f *fault.Collector) []*foreachMutation {
	out := make([]*foreachMutation, 0, len(list))
	for i := range list {
		fe := &list[i]
		p := fmt.Sprintf("%s[%d]", path, i)
		ptr := fmt.Sprintf("%s/%d", pointer, i)
		c := &foreachMutation{list: fe.List, order: fe.Order, context: fe.Context}
		if fe.List == "" {
			f.Add(p+".list", "foreach needs a list expression")
		} else if !strings.Contains(fe.List, "{{") {
			if _, err := s.JP.Compile(fe.List); err != nil {
				f.Add(p+".list", fmt.Sprintf("malformed JMESPath %q: %v", fe.List, unwrapCompile(err)))
			}
		}
		if fe.Order != nil && *fe.Order != kyvernov1.Ascending && *fe.Order != kyvernov1.Descending {
			f.Add(p+".order", fmt.Sprintf("unknown order %q, want Ascending or Descending", *fe.Order))
		}
		s.CheckContext(fe.Context, p+".context", f)
		c.preconditions = CompileConditions(fe.AnyAllConditions, p+".preconditions", f)
		forms := 0
		if fe.RawPatchStrategicMerge != nil {
			forms++
			c.patch = s.compileStrategic(fe.RawPatchStrategicMerge, p+".patchStrategicMerge", ptr+"/patchStrategicMerge", f)
		}
		if fe.PatchesJSON6902 != "" {
			forms++
			c.patch = s.compileJSON6902(fe.PatchesJSON6902, p+".patchesJson6902", ptr+"/patchesJson6902", true, f)
		}
		if fe.ForEachMutation != nil {
			forms++
			if len(fe.Context) > 0 || fe.AnyAllConditions != nil {
				f.Add(p, "a foreach entry with a nested foreach may not have its own context or preconditions")
			}
			var nested []kyvernov1.ForEachMutation
			if err := json.Unmarshal(fe.ForEachMutation.Raw, &nested); err != nil {
				f.Add(p+".foreach", "invalid nested foreach: "+err.Error())
			} else {
				c.nested = s.compileForeachMutation(nested, p+".foreach", ptr+"/foreach", f)
			}
		}
		if forms != 1 {
			f.Add(p, "a foreach entry needs exactly one of patchStrategicMerge, patchesJson6902 or foreach")
		}
		out = append(out, c)
	}
	return out
}
