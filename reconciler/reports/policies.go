package reports

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// snapshot is one compiled generation of the installed policies, as the
// background scan sees them. It is immutable.
type snapshot struct {
	// set holds the background policies that compiled.
	set *engine.PolicySet
	// background holds the report.PolicyRef of the policies in set: a
	// scan's results are the whole truth for these policies.
	background map[string]bool
	// catalog holds every installed policy (background or not) and its
	// rules; results of anything else are dropped from reports.
	catalog report.Catalog
	// types maps each watched resource type to the fingerprint of the
	// background policies (and exceptions) that can match it. A resource
	// evaluated under the same fingerprint need not be evaluated again.
	types map[schema.GroupVersionResource]typeEntry
	// compileErrors are the faults of policies left out of set.
	compileErrors fault.List
}

type typeEntry struct {
	clusterstate.ResourceType
	fingerprint uint64
}

// buildSnapshot takes the background scan's view of a policy snapshot
// (policycache.Snapshot.Reports: the policies and exceptions as the
// process's policy cache compiled them) and works out which resource
// types its policies need watched. A policy that reads params
// (validate.cel paramKind) is fingerprinted with the count of changes of
// the params it may read (policycache.Snapshot.ParamGeneration), so that a
// param change rescans the types of those policies only, and a change of
// an object no policy reads (most ConfigMaps) changes no fingerprint.
func buildSnapshot(policies *policycache.Snapshot, kinds *clusterstate.Kinds) *snapshot {
	in := policies.Installed
	snap := &snapshot{
		set:           policies.Reports.Set,
		compileErrors: policies.Reports.Errors,
		background:    map[string]bool{},
		catalog:       report.NewCatalog(in.Policies),
		types:         map[schema.GroupVersionResource]typeEntry{},
	}
	set := snap.set

	// Only the exceptions the scan applies go into its fingerprints, so
	// editing an admission-only exception (spec.background: false)
	// rescans nothing.
	exHash := fnv.New64a()
	for _, ex := range in.Exceptions {
		if !ex.Spec.BackgroundProcessingEnabled() {
			continue
		}
		exHash.Write([]byte(ex.Namespace + "/" + ex.Name + "@" + ex.ResourceVersion + "\x00"))
	}
	for _, ex := range in.CELExceptions {
		exHash.Write([]byte("policies.kyverno.io:" + ex.Namespace + "/" + ex.Name + "@" + ex.ResourceVersion + "\x00"))
	}
	exSum := exHash.Sum64()

	// Each resource type's fingerprint folds in, in key order, every
	// background policy that can match it.
	hashes := map[schema.GroupVersionResource]uint64{}
	for _, p := range set.Policies() {
		src := p.Source()
		snap.background[report.PolicyRef(src)] = true
		version := p.ID() + "@" + src.GetResourceVersion()
		if n := policies.ParamGeneration(p.ID()); n > 0 {
			version += fmt.Sprintf(" params@%d", n)
		}
		for _, t := range policyTypes(src, kinds) {
			h := fnv.New64a()
			var prev [8]byte
			binary.LittleEndian.PutUint64(prev[:], hashes[t.GVR])
			h.Write(prev[:])
			h.Write([]byte(version + "\x00"))
			hashes[t.GVR] = h.Sum64()
			snap.types[t.GVR] = typeEntry{ResourceType: t}
		}
	}
	for gvr, e := range snap.types {
		e.fingerprint = hashes[gvr] ^ exSum
		snap.types[gvr] = e
	}
	return snap
}

// policyTypes lists the resource types the policy's validate and
// verifyImages rules (after autogen) can match.
func policyTypes(p kyvernov1.PolicyInterface, kinds *clusterstate.Kinds) []clusterstate.ResourceType {
	if celRules := policycache.CELScannedRules(p); celRules != nil {
		seen := map[schema.GroupVersionResource]bool{}
		var out []clusterstate.ResourceType
		for _, r := range celRules {
			for _, g := range r.APIGroups {
				for _, v := range r.APIVersions {
					for _, res := range r.Resources {
						for _, t := range kinds.ResolveResource(g, v, res) {
							if !seen[t.GVR] {
								seen[t.GVR] = true
								out = append(out, t)
							}
						}
					}
				}
			}
		}
		return out
	}
	rules, err := autogen.ComputeRules(p)
	if err != nil {
		rules = p.GetSpec().Rules
	}
	seen := map[schema.GroupVersionResource]bool{}
	var out []clusterstate.ResourceType
	for i := range rules {
		r := &rules[i]
		if !r.HasValidate() && !r.HasVerifyImages() {
			continue
		}
		for _, sel := range r.MatchResources.GetKinds() {
			for _, t := range kinds.Resolve(sel) {
				if !seen[t.GVR] {
					seen[t.GVR] = true
					out = append(out, t)
				}
			}
		}
	}
	return out
}
