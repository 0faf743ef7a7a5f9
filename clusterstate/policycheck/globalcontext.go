package policycheck

import (
	"fmt"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/variables"
)

// GlobalContextEntries answers whether a GlobalContextEntry exists and is
// Ready (clusterstate/globalcontext.Store, as each admission replica
// loads them).
type GlobalContextEntries interface {
	EntryReady(name string) bool
}

// GlobalContextCluster is a Cluster that also knows the
// GlobalContextEntries (nil: they are not asked about).
type GlobalContextCluster interface {
	Cluster
	GlobalContextEntries() GlobalContextEntries
}

// GlobalContextWarnings are Kyverno's warnings for the globalReference
// context entries of a ClusterPolicy's or Policy's rules whose
// GlobalContextEntry does not exist or is not Ready ("Global context
// entry <name> does not exist or is not ready"): a warning, not a
// refusal, as the entry may be written after the policy; until it is
// Ready the rule errs naming it. A name with variables is not looked up.
// A "<entry>.<projection>" reference is looked up by its entry.
func GlobalContextWarnings(p kyvernov1.PolicyInterface, entries GlobalContextEntries) []string {
	var warnings []string
	seen := map[string]bool{}
	for _, rule := range p.GetSpec().Rules {
		for _, e := range rule.Context {
			if e.GlobalReference == nil {
				continue
			}
			name := e.GlobalReference.Name
			if name == "" || seen[name] || variables.IsVariable(name) {
				continue
			}
			seen[name] = true
			entry, _, _ := strings.Cut(name, ".")
			if !entries.EntryReady(entry) {
				warnings = append(warnings, fmt.Sprintf("Global context entry %s does not exist or is not ready", name))
			}
		}
	}
	return warnings
}
