package autogen

import (
	"slices"
	"strings"
)

// ControllersAnnotation on a policy lists the controller kinds autogen
// produces rules for, comma-separated ("Deployment,CronJob"), or "none".
const ControllersAnnotation = "pod-policies.kyverno.io/autogen-controllers"

// CronJob is the one controller whose Pod template sits two levels down
// (spec.jobTemplate.spec.template), so it gets a rule of its own.
const CronJob = "CronJob"

// DefaultControllers are the controllers autogen covers when the policy has
// no ControllersAnnotation, sorted.
var DefaultControllers = []string{"CronJob", "DaemonSet", "Deployment", "Job", "ReplicaSet", "ReplicationController", "StatefulSet"}

// templateControllers are the controllers that may share the autogen-<rule>
// rule; a requested kind outside this set is only honoured when no kind of
// the set is requested (Kyverno's backwards compatibility for custom kinds
// such as OpenKruise CloneSet).
var templateControllers = []string{"DaemonSet", "Deployment", "Job", "ReplicaSet", "ReplicationController", "StatefulSet"}

// gvkOf maps the built-in kinds to the group/version/kind strings that the
// generated match and exclude blocks name. Other kinds are written as given.
var gvkOf = map[string]string{
	"DaemonSet":             "apps/v1/DaemonSet",
	"Deployment":            "apps/v1/Deployment",
	"Job":                   "batch/v1/Job",
	"StatefulSet":           "apps/v1/StatefulSet",
	"ReplicaSet":            "apps/v1/ReplicaSet",
	"ReplicationController": "v1/ReplicationController",
	"CronJob":               "batch/v1/CronJob",
	"Pod":                   "v1/Pod",
}

func toGVKs(kinds []string) []any {
	out := make([]any, 0, len(kinds))
	for _, k := range kinds {
		if gvk, ok := gvkOf[k]; ok {
			out = append(out, gvk)
		} else {
			out = append(out, k)
		}
	}
	return out
}

// kindOf returns the kind named by a match entry such as "Pod", "v1/Pod",
// "apps/v1/Deployment", "Pod/status" or "Pod.status", without group, version
// or subresource.
func kindOf(entry string) string {
	parts := strings.Split(entry, "/")
	var kind string
	switch len(parts) {
	case 1:
		kind = strings.Replace(entry, ".", "/", 1)
	case 2:
		if parts[0] == "*" && parts[1] == "*" {
			kind = entry
		} else if isVersion(parts[0]) {
			kind = strings.Replace(parts[1], ".", "/", 1)
		} else {
			kind = entry // Kind/subresource
		}
	case 3:
		if isVersion(parts[0]) {
			kind = parts[1] + "/" + parts[2]
		} else {
			kind = strings.Replace(parts[2], ".", "/", 1)
		}
	case 4:
		kind = parts[2] + "/" + parts[3]
	default:
		return ""
	}
	kind, _, _ = strings.Cut(kind, "/")
	return kind
}

// isVersion reports whether s looks like an API version ("v1", "v2beta1") or
// ends in a wildcard, the way Kyverno tells a version from a group in a kind
// selector.
func isVersion(s string) bool {
	if strings.HasSuffix(s, "*") {
		return true
	}
	if len(s) < 2 || s[0] != 'v' || s[1] < '0' || s[1] > '9' {
		return false
	}
	return true
}

func containsKind(kinds []string, kind string) bool {
	return slices.ContainsFunc(kinds, func(e string) bool { return kindOf(e) == kind })
}

// policyEligible reports whether autogen may apply to the policy at all
// (Kyverno's CanAutoGen). One rule that generates resources, uses a JSON 6902
// patch, selects by name, names, selector or annotations, or lists Pod with
// other kinds turns autogen off for every rule; so does a policy in which no
// block names Pod or a Pod controller.
func policyEligible(rules []map[string]any) bool {
	needed := false
	for _, rule := range rules {
		if present(rule, "generate") {
			return false
		}
		if mutate, ok := rule["mutate"].(map[string]any); ok {
			if s, _ := mutate["patchesJson6902"].(string); s != "" {
				return false
			}
			for _, fe := range asList(mutate["foreach"]) {
				if m, ok := fe.(map[string]any); ok {
					if s, _ := m["patchesJson6902"].(string); s != "" {
						return false
					}
				}
			}
		}
		for _, block := range []string{"match", "exclude"} {
			for _, desc := range resourceDescriptions(rule[block]) {
				ok, names := descriptionEligible(desc)
				if !ok {
					return false
				}
				needed = needed || names
			}
		}
	}
	return needed
}

// resourceDescriptions returns the "resources" objects of a match or exclude
// block: the inline one, then those of every any and all entry. A missing
// description counts as an empty one, as it does in Kyverno's typed API.
func resourceDescriptions(block any) []map[string]any {
	b, ok := block.(map[string]any)
	if !ok {
		return nil
	}
	descs := []map[string]any{asMap(b["resources"])}
	for _, key := range []string{"any", "all"} {
		for _, f := range asList(b[key]) {
			if fm, ok := f.(map[string]any); ok {
				descs = append(descs, asMap(fm["resources"]))
			}
		}
	}
	return descs
}

// descriptionEligible reports whether a resource description allows autogen,
// and whether it names Pod or a Pod controller.
func descriptionEligible(desc map[string]any) (ok, namesPodKinds bool) {
	if s, _ := desc["name"].(string); s != "" {
		return false, false
	}
	if len(asList(desc["names"])) > 0 || present(desc, "selector") || present(desc, "annotations") {
		return false, false
	}
	kinds := asStrings(desc["kinds"])
	if len(kinds) > 1 && containsKind(kinds, "Pod") {
		return false, false
	}
	for _, k := range kinds {
		// Kyverno compares the kinds as written: "v1/Pod" does not count here.
		if k == "Pod" || slices.Contains(DefaultControllers, k) {
			namesPodKinds = true
		}
	}
	return true, namesPodKinds
}

// requestedControllers returns the controller kinds that rules are generated
// for: the annotation's list when set, else DefaultControllers; nil when
// autogen is off. The list is sorted and free of duplicates. Kinds are taken
// verbatim, as Kyverno does: " Job" (with a space) is not Job.
func requestedControllers(annotations map[string]string, eligible bool) []string {
	if !eligible {
		return nil
	}
	value, ok := annotations[ControllersAnnotation]
	if !ok {
		return slices.Clone(DefaultControllers)
	}
	kinds := strings.Split(value, ",")
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	if len(kinds) == 1 && (kinds[0] == "none" || kinds[0] == "") {
		return nil
	}
	return kinds
}

// podTemplateKinds picks the kinds of the autogen-<rule> rule from the
// requested controllers: "all" means every template controller; otherwise
// the requested built-in template controllers; when none is requested, the
// requested list as is (custom kinds), less CronJob.
func podTemplateKinds(controllers []string) []string {
	var noCronJob []string
	for _, c := range controllers {
		if c != CronJob {
			noCronJob = append(noCronJob, c)
		}
	}
	if len(noCronJob) == 0 {
		return nil
	}
	if slices.Contains(noCronJob, "all") && len(noCronJob) == 1 {
		return slices.Clone(templateControllers)
	}
	var known []string
	for _, c := range noCronJob {
		if slices.Contains(templateControllers, c) {
			known = append(known, c)
		}
	}
	if len(known) > 0 {
		return known
	}
	return noCronJob
}

// wantsCronJob reports whether a CronJob rule is generated. Kyverno tests the
// joined annotation value with a substring match, so "CronJobs" or any kind
// containing "all" count too; the common cases are CronJob and all.
func wantsCronJob(controllers []string) bool {
	joined := strings.Join(controllers, ",")
	return strings.Contains(joined, CronJob) || strings.Contains(joined, "all")
}
