package admission

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/webhook/metrics"
)

// inventoryTimeout bounds the informer reads of one scrape.
const inventoryTimeout = 5 * time.Second

// servedPolicies is what the inventory needs of the policy cache.
type servedPolicies interface {
	Synced() bool
	Snapshot() *policycache.Snapshot
}

// policyInventory lists, for kyverno_policy_rule_info_total, every
// policy the informers hold (policycache.ListPolicies: ClusterPolicies,
// Policies and the policies.kyverno.io kinds), as Kyverno lists every
// policy and not only those it serves. A policy is ready when this
// replica serves its current generation at admission; one that is not
// served (admission disabled, or it does not compile) is as ready as
// the status controller, which compiles it, found that generation to be.
// A generation neither has caught up with yet is not ready.
//
// Until the policy cache has synced it lists nothing, so a scrape never
// waits for, or starts, an informer.
func policyInventory(reader client.Reader, served servedPolicies) metrics.PolicyInventory {
	return func() ([]metrics.PolicyState, error) {
		if !served.Synced() {
			return nil, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), inventoryTimeout)
		defer cancel()
		// The informers' own objects: the scrape only reads them.
		policies, err := policycache.ListPolicies(ctx, reader, client.UnsafeDisableDeepCopy)
		if err != nil {
			return nil, err
		}
		snapshot := served.Snapshot()
		out := make([]metrics.PolicyState, 0, len(policies))
		for _, p := range policies {
			out = append(out, metrics.PolicyState{Policy: p, Ready: policyReady(p, snapshot)})
		}
		return out, nil
	}
}

// policyReady is the status_ready of p; see policyInventory.
func policyReady(p kyvernov1.PolicyInterface, s *policycache.Snapshot) bool {
	id := policyid.Of(p)
	if s != nil {
		for _, set := range s.Sets() {
			if served, ok := set.Lookup(id); ok && served.Source().GetGeneration() == p.GetGeneration() {
				return true
			}
		}
	}
	return policiesv1.ReadyAt(p)
}
