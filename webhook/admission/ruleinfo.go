package admission

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine"
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
// ClusterPolicy and Policy the informers hold, as Kyverno lists every
// policy and not only those it serves. A policy is ready when this
// replica serves its current generation at admission; one that is not
// served (spec.admission: false, or it does not compile) is as ready as
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
		var cpols kyvernov1.ClusterPolicyList
		if err := reader.List(ctx, &cpols, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing ClusterPolicies: %w", err)
		}
		var pols kyvernov1.PolicyList
		if err := reader.List(ctx, &pols, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing Policies: %w", err)
		}
		snapshot := served.Snapshot()
		out := make([]metrics.PolicyState, 0, len(cpols.Items)+len(pols.Items))
		for i := range cpols.Items {
			out = append(out, metrics.PolicyState{Policy: &cpols.Items[i], Ready: policyReady(&cpols.Items[i], snapshot)})
		}
		for i := range pols.Items {
			out = append(out, metrics.PolicyState{Policy: &pols.Items[i], Ready: policyReady(&pols.Items[i], snapshot)})
		}
		return out, nil
	}
}

// policyReady is the status_ready of p; see policyInventory.
func policyReady(p kyvernov1.PolicyInterface, s *policycache.Snapshot) bool {
	key := engine.PolicyKey(p)
	if s != nil {
		for _, set := range []*engine.PolicySet{s.Fail, s.Ignore} {
			if served, ok := set.Lookup(key); ok && served.Source().GetGeneration() == p.GetGeneration() {
				return true
			}
		}
	}
	cond := meta.FindStatusCondition(p.GetStatus().Conditions, kyvernov1.PolicyConditionReady)
	return cond != nil && cond.ObservedGeneration == p.GetGeneration() && cond.Status == metav1.ConditionTrue
}
