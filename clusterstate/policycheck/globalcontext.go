package policycheck

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
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

// GlobalContextStatus answers EntryReady from the entries' status as the
// API server holds it (their Ready condition, which the admission
// leader writes from its own store): for a process that does not load
// the entries itself, as gitsync's pre-apply check. A read that fails
// answers not Ready, which costs a warning only.
type GlobalContextStatus struct {
	Reader client.Reader
}

// globalContextReadTimeout bounds the read of one entry.
const globalContextReadTimeout = 10 * time.Second

// EntryReady implements GlobalContextEntries.
func (s GlobalContextStatus) EntryReady(name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), globalContextReadTimeout)
	defer cancel()
	var e kyvernov2alpha1.GlobalContextEntry
	if err := s.Reader.Get(ctx, client.ObjectKey{Name: name}, &e); err != nil {
		return false
	}
	return meta.IsStatusConditionTrue(e.Status.Conditions, kyvernov2alpha1.ConditionReady)
}
