package policycheck

import (
	"context"
	"slices"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/wildcard"
)

// ReaderCluster is a Cluster that also knows who reads what validate and
// mutate rules match, for background scans and reports (nil: nobody is
// asked).
type ReaderCluster interface {
	Cluster
	ReportsReader() *Writer
}

// ReadWarnings are Kyverno's warnings of a ClusterPolicy or Policy whose
// validate or mutate rules (autogen's rules for Pod controllers included)
// match a kind charter's reports controller (r) may not get, list and
// watch (pkg/policy/validate and pkg/policy/mutate validateAuth for the
// reports controller's ServiceAccount): "<user> requires permissions
// get,list,watch for resource v1/Secret". Warnings, not refusals, as in
// Kyverno: admission still evaluates the rules; scans cannot read those
// objects. As Kyverno, a rule naming a kind with a wildcard is not asked
// about, a validate rule gives its first warning only, a mutate rule one
// per kind; a kind the cluster does not serve is not asked (KindFaults
// refuses it).
func ReadWarnings(p kyvernov1.PolicyInterface, cluster Cluster, r *Writer) ([]string, error) {
	rules, err := autogen.ComputeRules(p)
	if err != nil {
		rules = p.GetSpec().Rules // the compile check names the fault
	}
	ctx, cancel := context.WithTimeout(context.Background(), writerCheckTimeout)
	defer cancel()
	var warnings []string
	for i := range rules {
		rule := &rules[i]
		if !rule.HasValidate() && !rule.HasMutate() {
			continue
		}
		kinds := rule.MatchResources.GetKinds()
		if slices.ContainsFunc(kinds, wildcard.ContainsWildcard) {
			continue
		}
		for _, kind := range kinds {
			msg, err := r.missing(ctx, cluster, []string{"get", "list", "watch"}, "", kind, "", "")
			if err != nil {
				return nil, err
			}
			if msg == "" {
				continue
			}
			if !slices.Contains(warnings, msg) {
				warnings = append(warnings, msg)
			}
			if !rule.HasMutate() {
				break
			}
		}
	}
	return warnings, nil
}
