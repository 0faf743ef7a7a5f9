package policycache

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/policycheck"
)

// ListPolicies lists every policy kind the cache serves
// (policycheck.Kinds(policycheck.RolePolicy): ClusterPolicies, Policies,
// then the policies.kyverno.io kinds, each cluster-wide kind before its
// Namespaced variant), in that order, so the cache and the controllers
// that read the same informers (policy status) agree on what "every
// installed policy" is.
func ListPolicies(ctx context.Context, reader client.Reader, opts ...client.ListOption) ([]kyvernov1.PolicyInterface, error) {
	var policies []kyvernov1.PolicyInterface
	for _, k := range policycheck.Kinds(policycheck.RolePolicy) {
		list := k.NewList()
		if err := reader.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.Plural(), err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.Plural(), err)
		}
		for _, item := range items {
			p, ok := item.(kyvernov1.PolicyInterface)
			if !ok {
				return nil, fmt.Errorf("listing %s: %T is no policy", k.Plural(), item)
			}
			policies = append(policies, p)
		}
	}
	return policies, nil
}
