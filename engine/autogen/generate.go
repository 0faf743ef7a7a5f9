package autogen

import (
	"bytes"
	"fmt"
	"strings"
)

// maxRuleNameLength is the longest rule name Kyverno allows; generated names
// are cut to it.
const maxRuleNameLength = 63

// autogenPrefix starts the name of every generated rule. Rules of the policy
// whose names start with it are treated as leftovers of Kyverno < 1.10, which
// wrote generated rules into spec.rules: they never seed autogen themselves.
const autogenPrefix = "autogen-"

func isGeneratedName(name string) bool { return strings.HasPrefix(name, autogenPrefix) }

func generatedName(prefix, name string) string {
	name = prefix + "-" + name
	if len(name) > maxRuleNameLength {
		name = name[:maxRuleNameLength]
	}
	return name
}

// generateRules returns the rules generated from rules (JSON objects) for the
// given controllers, in Kyverno's order: for each source rule, its
// autogen-<rule> then its autogen-cronjob-<rule>. The input is not modified.
func generateRules(rules []map[string]any, controllers []string) ([]map[string]any, error) {
	var out []map[string]any
	templateKinds := podTemplateKinds(controllers)
	cronJob := wantsCronJob(controllers)
	for i, rule := range rules {
		if podRule := podControllersRule(rule, templateKinds); podRule != nil {
			r, err := finish(podRule, podReplacements, podCELReplacements)
			if err != nil {
				return nil, fmt.Errorf("spec.rules[%d]: autogen for Pod controllers: %w", i, err)
			}
			out = append(out, r)
		}
		if !cronJob {
			continue
		}
		if cronRule := cronJobRule(rule, controllers); cronRule != nil {
			r, err := finish(cronRule, cronJobReplacements, cronJobCELReplacements)
			if err != nil {
				return nil, fmt.Errorf("spec.rules[%d]: autogen for CronJob: %w", i, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// sourceMatchesPods reports whether rule seeds autogen: it matches Pod, and
// its exclude block, when it names kinds, names Pod too. Rules already named
// autogen-* never do.
func sourceMatchesPods(rule map[string]any) bool {
	name, _ := rule["name"].(string)
	if isGeneratedName(name) {
		return false
	}
	if !containsKind(blockKinds(rule["match"]), "Pod") {
		return false
	}
	excludeKinds := blockKinds(rule["exclude"])
	return len(excludeKinds) == 0 || containsKind(excludeKinds, "Pod")
}

// blockKinds lists every kind a match or exclude block names.
func blockKinds(block any) []string {
	var kinds []string
	for _, desc := range resourceDescriptions(block) {
		kinds = append(kinds, asStrings(desc["kinds"])...)
	}
	return kinds
}

// podControllersRule builds autogen-<rule> (before the variable rewrite),
// or returns nil when the rule does not seed one.
func podControllersRule(rule map[string]any, kinds []string) map[string]any {
	if len(kinds) == 0 || !sourceMatchesPods(rule) {
		return nil
	}
	name, _ := rule["name"].(string)
	return wrapRule(rule, generatedName("autogen", name), "template", "spec/template", kinds, replaceKindsOfPodEntries)
}

// cronJobRule builds autogen-cronjob-<rule> (before the variable rewrite)
// from the Pod controllers rule, so that its template sits under
// spec.jobTemplate.spec.template.
func cronJobRule(rule map[string]any, controllers []string) map[string]any {
	// The kinds of the intermediate rule do not matter: the CronJob step
	// overwrites every kinds list it touches.
	kinds := podTemplateKinds(controllers)
	if len(kinds) == 0 {
		kinds = []string{CronJob}
	}
	job := podControllersRule(rule, kinds)
	if job == nil {
		return nil
	}
	name, _ := rule["name"].(string)
	// The message references were already shifted under spec/template; the
	// second step adds spec/jobTemplate in front of that, which gives
	// pattern/spec/jobTemplate/spec/template/... (Kyverno shifts by the full
	// spec/jobTemplate/spec/template a second time, which yields a path that
	// does not exist in the wrapped pattern).
	return wrapRule(job, generatedName("autogen-cronjob", name), "jobTemplate", "spec/jobTemplate", []string{CronJob}, replaceAllKinds)
}

// filterRewrite rewrites the kinds of the entries of an any/all list.
type filterRewrite func(filters []any, kinds []string) []any

// replaceKindsOfPodEntries gives the entries that name Pod the controllers'
// kinds and leaves the others alone.
func replaceKindsOfPodEntries(filters []any, kinds []string) []any {
	out := deepCopy(filters).([]any)
	for _, f := range out {
		fm, ok := f.(map[string]any)
		if !ok {
			continue
		}
		res := asMap(fm["resources"])
		if containsKind(asStrings(res["kinds"]), "Pod") {
			res["kinds"] = toGVKs(kinds)
			fm["resources"] = res
		}
	}
	return out
}

// replaceAllKinds gives every entry the kinds, even entries that named none.
func replaceAllKinds(filters []any, kinds []string) []any {
	out := deepCopy(filters).([]any)
	for _, f := range out {
		fm, ok := f.(map[string]any)
		if !ok {
			continue
		}
		res := asMap(fm["resources"])
		res["kinds"] = toGVKs(kinds)
		fm["resources"] = res
	}
	return out
}

// wrapRule copies rule under a new name, retargets its match and exclude
// blocks to kinds and moves what it checks or patches under spec.<tplKey>.
// It returns nil for rules autogen cannot translate (e.g. validate.manifests).
func wrapRule(src map[string]any, name, tplKey, shift string, kinds []string, rewrite filterRewrite) map[string]any {
	rule := deepCopy(src).(map[string]any)
	rule["name"] = name

	match := asMap(rule["match"])
	switch {
	case len(asList(match["any"])) > 0:
		match["any"] = rewrite(asList(match["any"]), kinds)
	case len(asList(match["all"])) > 0:
		match["all"] = rewrite(asList(match["all"]), kinds)
	default:
		res := asMap(match["resources"])
		res["kinds"] = toGVKs(kinds)
		match["resources"] = res
	}
	rule["match"] = match

	if exclude, ok := rule["exclude"].(map[string]any); ok {
		switch {
		case len(asList(exclude["any"])) > 0:
			exclude["any"] = rewrite(asList(exclude["any"]), kinds)
		case len(asList(exclude["all"])) > 0:
			exclude["all"] = rewrite(asList(exclude["all"]), kinds)
		default:
			if res, ok := exclude["resources"].(map[string]any); ok && len(asList(res["kinds"])) > 0 {
				res["kinds"] = toGVKs(kinds)
			}
		}
	}

	wrap := func(v any) map[string]any {
		return map[string]any{"spec": map[string]any{tplKey: v}}
	}

	if mutate, ok := rule["mutate"].(map[string]any); ok {
		if present(mutate, "patchStrategicMerge") {
			// Only the patch survives: targets and
			// mutateExistingOnPolicyUpdate are not carried over.
			rule["mutate"] = map[string]any{"patchStrategicMerge": wrap(mutate["patchStrategicMerge"])}
			return rule
		}
		if entries := asList(mutate["foreach"]); len(entries) > 0 {
			// Each entry keeps its list, context and preconditions; order
			// and nested foreach are dropped.
			out := make([]any, 0, len(entries))
			for _, e := range entries {
				em := asMap(e)
				ne := map[string]any{}
				for _, key := range []string{"list", "context", "preconditions"} {
					if nonEmpty(em[key]) {
						ne[key] = em[key]
					}
				}
				ne["patchStrategicMerge"] = wrap(em["patchStrategicMerge"])
				out = append(out, ne)
			}
			rule["mutate"] = map[string]any{"foreach": out}
			return rule
		}
	}

	if validate, ok := rule["validate"].(map[string]any); ok {
		// Every rewritten validation keeps the failure action settings.
		base := func(pivot string) map[string]any {
			v := map[string]any{}
			for _, key := range []string{"failureAction", "failureActionOverrides", "allowExistingViolations"} {
				if present(validate, key) {
					v[key] = validate[key]
				}
			}
			if msg, _ := validate["message"].(string); msg != "" {
				v["message"] = shiftReferences(msg, shift, pivot)
			}
			return v
		}
		switch {
		case present(validate, "pattern"):
			v := base("pattern")
			v["pattern"] = wrap(validate["pattern"])
			rule["validate"] = v
			return rule
		case present(validate, "deny"):
			v := base("deny")
			v["deny"] = validate["deny"]
			rule["validate"] = v
			return rule
		case present(validate, "podSecurity"):
			v := base("podSecurity")
			ps := asMap(validate["podSecurity"])
			nps := map[string]any{}
			for _, key := range []string{"level", "version", "exclude"} {
				if nonEmpty(ps[key]) {
					nps[key] = ps[key]
				}
			}
			v["podSecurity"] = nps
			rule["validate"] = v
			return rule
		case present(validate, "anyPattern"):
			v := base("anyPattern")
			var patterns []any
			for _, p := range asList(validate["anyPattern"]) {
				patterns = append(patterns, wrap(p))
			}
			v["anyPattern"] = patterns
			rule["validate"] = v
			return rule
		case len(asList(validate["foreach"])) > 0:
			// foreach lists address the resource through variables, which
			// the textual rewrite moves; the entries stay as written.
			v := base("pattern")
			v["foreach"] = validate["foreach"]
			rule["validate"] = v
			return rule
		case present(validate, "cel"):
			return rule
		case present(validate, "assert"):
			validate["assert"] = wrapAssertion(validate["assert"], tplKey)
			return rule
		}
	}

	if present(rule, "verifyImages") {
		return rule
	}
	return nil
}

// wrapAssertion moves the object and oldObject branches of a kyverno-json
// assertion tree under spec.<tplKey>.
func wrapAssertion(tree any, tplKey string) any {
	m, ok := tree.(map[string]any)
	if !ok {
		return tree
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, node := range []string{"object", "oldObject"} {
		if obj, ok := m[node].(map[string]any); ok {
			out[node] = map[string]any{"spec": map[string]any{tplKey: obj}}
		}
	}
	return out
}

// keptFields are the rule fields a generated rule carries; anything else
// (imageExtractors, generate, ...) is dropped, as in Kyverno.
var keptFields = []string{
	"name", "match", "exclude", "celPreconditions", "context", "preconditions",
	"mutate", "validate", "verifyImages", "skipBackgroundRequests", "reportProperties",
}

// finish drops the fields a generated rule does not carry, then rewrites the
// variables that address the Pod so they address the template instead. The
// rewrite is textual over the whole rule's JSON, as in Kyverno: it also
// touches messages, context entries and anything else that spells
// "request.object.spec".
func finish(rule map[string]any, replacements, celReplacements []replacement) (map[string]any, error) {
	kept := map[string]any{}
	for _, key := range keptFields {
		v, ok := rule[key]
		if !ok || v == nil {
			continue
		}
		switch key {
		case "name", "skipBackgroundRequests":
			kept[key] = v
		case "preconditions":
			if conditionsSet(v) {
				kept[key] = v
			}
		default:
			if nonEmpty(v) {
				kept[key] = v
			}
		}
	}
	if _, ok := kept["match"]; !ok {
		kept["match"] = map[string]any{}
	}

	data, err := encode(kept)
	if err != nil {
		return nil, err
	}
	use := replacements
	if validate, ok := kept["validate"].(map[string]any); ok && present(validate, "cel") {
		// CEL reads the resource as object / oldObject.
		use = celReplacements
	}
	for _, r := range use {
		data = bytes.ReplaceAll(data, r.old, r.new)
	}
	var out map[string]any
	if err := decode(data, &out); err != nil {
		return nil, fmt.Errorf("re-reading rule %q after the variable rewrite: %w", kept["name"], err)
	}
	return out, nil
}

// conditionsSet reports whether preconditions hold at least one condition,
// in either the {any, all} or the plain list form.
func conditionsSet(v any) bool {
	switch t := v.(type) {
	case []any:
		return len(t) > 0
	case map[string]any:
		return len(asList(t["any"])) > 0 || len(asList(t["all"])) > 0
	}
	return false
}

type replacement struct{ old, new []byte }

func replacements(pairs ...string) []replacement {
	var out []replacement
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, replacement{[]byte(pairs[i]), []byte(pairs[i+1])})
	}
	return out
}

// The replacements run in this order over the rule's JSON. The rewrite is
// blind: "request.object.spec.template" becomes
// "request.object.spec.template.spec.template" (a known Kyverno quirk), and
// quoting a segment (request."object".metadata) is the documented way to
// keep a reference to the controller itself.
var (
	podReplacements = replacements(
		"request.object.spec", "request.object.spec.template.spec",
		"request.oldObject.spec", "request.oldObject.spec.template.spec",
		"request.object.metadata", "request.object.spec.template.metadata",
		"request.oldObject.metadata", "request.oldObject.spec.template.metadata",
	)
	podCELReplacements = replacements(
		"object.spec", "object.spec.template.spec",
		"oldObject.spec", "oldObject.spec.template.spec",
		"object.metadata", "object.spec.template.metadata",
		"oldObject.metadata", "oldObject.spec.template.metadata",
	)
	cronJobReplacements = replacements(
		"request.object.spec", "request.object.spec.jobTemplate.spec.template.spec",
		"request.oldObject.spec", "request.oldObject.spec.jobTemplate.spec.template.spec",
		"request.object.metadata", "request.object.spec.jobTemplate.spec.template.metadata",
		"request.oldObject.metadata", "request.oldObject.spec.jobTemplate.spec.template.metadata",
	)
	cronJobCELReplacements = replacements(
		"object.spec", "object.spec.jobTemplate.spec.template.spec",
		"oldObject.spec", "oldObject.spec.jobTemplate.spec.template.spec",
		"object.metadata", "object.spec.jobTemplate.spec.template.metadata",
		"oldObject.metadata", "oldObject.spec.jobTemplate.spec.template.metadata",
	)
)
