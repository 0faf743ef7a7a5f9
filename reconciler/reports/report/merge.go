package report

import (
	"encoding/json"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/webhookrules"
)

// Catalog knows the installed policies and their rules after autogen
// expansion, by PolicyRef. A result whose policy or rule is not in the
// catalog is dropped from reports (§6.3).
type Catalog map[string]map[string]bool

// NewCatalog indexes the rules of the policies. A policy whose autogen
// expansion fails keeps only the rules it spells out. Each kind writes
// its own source, so policies of different kinds and one name have their
// own entries.
func NewCatalog(policies []kyvernov1.PolicyInterface) Catalog {
	c := make(Catalog, len(policies))
	for _, p := range policies {
		ref := PolicyRef(p)
		names := c[ref]
		if names == nil {
			names = map[string]bool{}
			c[ref] = names
		}
		if webhookrules.ValidatingPolicy(p) != nil {
			// One result per resource, rule "" (or the exception and
			// evaluation results' names).
			names[""], names[engine.RuleException], names[engine.RuleEvaluation] = true, true, true
			continue
		}
		if webhookrules.ImageValidatingPolicy(p) != nil || isGeneratingPolicy(p) {
			// One result per resource, under the policy's name.
			names[p.GetName()], names[engine.RuleException] = true, true
			continue
		}
		if isMutatingPolicy(p) {
			// One result per resource, rule "": the background scan's,
			// or a mutate-existing run's for its trigger.
			names[""], names[engine.RuleException], names[engine.RuleEvaluation] = true, true, true
			continue
		}
		rules, err := autogen.ComputeRules(p)
		if err != nil {
			rules = p.GetSpec().Rules
		}
		for i := range rules {
			names[rules[i].Name] = true
		}
	}
	return c
}

// Has reports whether the policy (by PolicyRef) exists and has the rule.
func (c Catalog) Has(ref, rule string) bool { return c[ref][rule] }

// HasResult reports whether the result's policy exists and has its rule.
func (c Catalog) HasResult(r *v1alpha2.PolicyReportResult) bool {
	return c.Has(ResultRef(r), r.Rule)
}

// PolicyRef names a policy the way its report results do: by source and
// policy, "<source>/<key>". A ClusterPolicy and a ValidatingPolicy of one
// name share the policy field and differ in source, and Kyverno keys
// results by both too.
func PolicyRef(p kyvernov1.PolicyInterface) string {
	return SourceOf(p) + "/" + policyid.Key(p)
}

// ResultRef is the PolicyRef of the policy that wrote a result.
func ResultRef(r *v1alpha2.PolicyReportResult) string { return r.Source + "/" + r.Policy }

// resultKey identifies a result within one report: Kyverno keys
// kyverno.io results by source, policy and rule (the resource is the
// report's scope).
func resultKey(r *v1alpha2.PolicyReportResult) string {
	return r.Source + "/" + r.Policy + "/" + r.Rule
}

// Prune drops the results whose policy or rule is not in the catalog, and
// any result not written by charter. It returns the results in order.
func Prune(results []v1alpha2.PolicyReportResult, catalog Catalog) []v1alpha2.PolicyReportResult {
	out := make([]v1alpha2.PolicyReportResult, 0, len(results))
	for i := range results {
		r := &results[i]
		if ChartersSource(r.Source) && catalog.HasResult(r) {
			out = append(out, *r)
		}
	}
	Sort(out)
	return out
}

// Merge merges admission results into a report's results (§6.3): results
// collide on source/policy/rule, and on a collision the result with the
// strictly later timestamp wins, so on a tie the existing one stays.
// Existing results are otherwise kept as they are, whatever their policy:
// the caller drops incoming results of policies it knows are gone, and
// dropping stale existing ones is left to whoever knows every policy (the
// leader's scans and sweeps), since a writer whose view of the policies
// lags would drop the results of a policy just added. Only charter's
// results are kept.
func Merge(existing, incoming []v1alpha2.PolicyReportResult) []v1alpha2.PolicyReportResult {
	byKey := make(map[string]int, len(existing)+len(incoming))
	out := make([]v1alpha2.PolicyReportResult, 0, len(existing)+len(incoming))
	for _, in := range [][]v1alpha2.PolicyReportResult{existing, incoming} {
		for i := range in {
			r := &in[i]
			if !ChartersSource(r.Source) {
				continue
			}
			k := resultKey(r)
			if j, ok := byKey[k]; ok {
				if later(r.Timestamp, out[j].Timestamp) && !SameOutcome(r, &out[j]) {
					out[j] = *r
				}
				continue
			}
			byKey[k] = len(out)
			out = append(out, *r)
		}
	}
	Sort(out)
	return out
}

// ReplaceBackground merges the results of a background scan into a
// report's results. The scan evaluated the current object against every
// background policy (scanned names them by PolicyRef), so it is the truth for those
// policies: their existing results are replaced as a whole, including
// results of rules that no longer match the resource. (Kyverno keeps such
// stale results until their rule disappears; charter does not.) Results of
// other policies, which only admission produces, are kept as they are,
// even of a policy or rule the catalog does not know: the scan's catalog
// may be older than the admission that wrote them (a policy created a
// moment ago), and results of policies that are really gone are the
// sweep's to drop (Prune), which runs whenever the catalog shrinks.
//
// A scan result that says what the existing one says (SameOutcome: an
// admission of the same object a moment before) keeps the existing one,
// so the report is not rewritten only to move a timestamp and the
// process: Kyverno writes such a report once (its e2e tests assert
// metadata.generation 1 after admission and the scan).
func ReplaceBackground(existing, scan []v1alpha2.PolicyReportResult, scanned map[string]bool, catalog Catalog) []v1alpha2.PolicyReportResult {
	out := make([]v1alpha2.PolicyReportResult, 0, len(existing)+len(scan))
	replaced := map[string]*v1alpha2.PolicyReportResult{}
	for i := range existing {
		r := &existing[i]
		switch {
		case !ChartersSource(r.Source):
		case scanned[ResultRef(r)]:
			replaced[resultKey(r)] = r
		default:
			out = append(out, *r)
		}
	}
	for i := range scan {
		r := &scan[i]
		if !catalog.HasResult(r) {
			continue
		}
		if old, ok := replaced[resultKey(r)]; ok && SameOutcome(r, old) {
			r = old
		}
		out = append(out, *r)
	}
	Sort(out)
	return out
}

// SameOutcome reports whether two results of one policy and rule say the
// same about their resource: every field but the timestamp and the
// process that produced them (admission or background scan).
func SameOutcome(a, b *v1alpha2.PolicyReportResult) bool {
	if a.Source != b.Source || a.Policy != b.Policy || a.Rule != b.Rule || a.Category != b.Category ||
		a.Severity != b.Severity || a.Result != b.Result || a.Message != b.Message || a.Scored != b.Scored {
		return false
	}
	for _, pair := range [][2]map[string]string{{a.Properties, b.Properties}, {b.Properties, a.Properties}} {
		for k, v := range pair[0] {
			if k == processProperty {
				continue
			}
			if w, ok := pair[1][k]; !ok || w != v {
				return false
			}
		}
	}
	return equality.Semantic.DeepEqual(a.Resources, b.Resources) && equality.Semantic.DeepEqual(a.ResourceSelector, b.ResourceSelector)
}

// Digest fingerprints results without their timestamps and the process
// that produced them (SameOutcome): two result lists with the same digest
// say the same thing, and rewriting one with the other would only move
// timestamps, or turn an admission's result into the background scan's
// (Kyverno writes such a report once). The results must be sorted.
//
// Every field but the timestamp goes in, each length-prefixed so that no
// two different lists write the same bytes; the controller digests every
// result list it builds, so this avoids reflection-based encoding.
func Digest(results []v1alpha2.PolicyReportResult) string {
	h := fnv.New64a()
	var buf []byte
	for i := range results {
		r := &results[i]
		buf = buf[:0]
		for _, f := range [...]string{r.Source, r.Policy, r.Rule, r.Category, string(r.Severity), string(r.Result), r.Message} {
			buf = appendString(buf, f)
		}
		buf = strconv.AppendBool(buf, r.Scored)
		// Sized up front: this runs per request.
		keys := slices.AppendSeq(make([]string, 0, len(r.Properties)), maps.Keys(r.Properties))
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == processProperty })
		slices.Sort(keys)
		buf = strconv.AppendInt(buf, int64(len(keys)), 10)
		for _, k := range keys {
			buf = appendString(appendString(buf, k), r.Properties[k])
		}
		buf = strconv.AppendInt(buf, int64(len(r.Resources)), 10)
		for j := range r.Resources {
			o := &r.Resources[j]
			for _, f := range [...]string{o.APIVersion, o.Kind, o.Namespace, o.Name, string(o.UID)} {
				buf = appendString(buf, f)
			}
		}
		if r.ResourceSelector != nil {
			// Rare (charter never sets it): encoding is fine here.
			sel, _ := json.Marshal(r.ResourceSelector)
			buf = appendString(buf, string(sel))
		}
		buf = append(buf, '\n')
		h.Write(buf)
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

func appendString(buf []byte, s string) []byte {
	buf = strconv.AppendInt(buf, int64(len(s)), 10)
	buf = append(buf, ':')
	return append(buf, s...)
}

// Equivalent reports whether two sorted result lists say the same thing,
// ignoring timestamps.
func Equivalent(a, b []v1alpha2.PolicyReportResult) bool {
	return len(a) == len(b) && Digest(a) == Digest(b)
}
