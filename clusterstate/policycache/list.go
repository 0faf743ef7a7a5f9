package policycache

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// ListPolicies lists every policy kind the cache serves, ClusterPolicies,
// Policies, ValidatingPolicies, NamespacedValidatingPolicies,
// GeneratingPolicies, NamespacedGeneratingPolicies, MutatingPolicies,
// NamespacedMutatingPolicies, ImageValidatingPolicies and
// NamespacedImageValidatingPolicies, in that order, so the cache and the controllers that read the same informers
// (policy status) agree on what "every installed policy" is.
func ListPolicies(ctx context.Context, reader client.Reader, opts ...client.ListOption) ([]kyvernov1.PolicyInterface, error) {
	var cpols kyvernov1.ClusterPolicyList
	if err := reader.List(ctx, &cpols, opts...); err != nil {
		return nil, fmt.Errorf("listing ClusterPolicies: %w", err)
	}
	var pols kyvernov1.PolicyList
	if err := reader.List(ctx, &pols, opts...); err != nil {
		return nil, fmt.Errorf("listing Policies: %w", err)
	}
	var vpols policiesv1.ValidatingPolicyList
	if err := reader.List(ctx, &vpols, opts...); err != nil {
		return nil, fmt.Errorf("listing ValidatingPolicies: %w", err)
	}
	var nvpols policiesv1.NamespacedValidatingPolicyList
	if err := reader.List(ctx, &nvpols, opts...); err != nil {
		return nil, fmt.Errorf("listing NamespacedValidatingPolicies: %w", err)
	}
	var gpols policiesv1.GeneratingPolicyList
	if err := reader.List(ctx, &gpols, opts...); err != nil {
		return nil, fmt.Errorf("listing GeneratingPolicies: %w", err)
	}
	var ngpols policiesv1.NamespacedGeneratingPolicyList
	if err := reader.List(ctx, &ngpols, opts...); err != nil {
		return nil, fmt.Errorf("listing NamespacedGeneratingPolicies: %w", err)
	}
	var mpols policiesv1.MutatingPolicyList
	if err := reader.List(ctx, &mpols, opts...); err != nil {
		return nil, fmt.Errorf("listing MutatingPolicies: %w", err)
	}
	var nmpols policiesv1.NamespacedMutatingPolicyList
	if err := reader.List(ctx, &nmpols, opts...); err != nil {
		return nil, fmt.Errorf("listing NamespacedMutatingPolicies: %w", err)
	}
	var ivpols policiesv1.ImageValidatingPolicyList
	if err := reader.List(ctx, &ivpols, opts...); err != nil {
		return nil, fmt.Errorf("listing ImageValidatingPolicies: %w", err)
	}
	var nivpols policiesv1.NamespacedImageValidatingPolicyList
	if err := reader.List(ctx, &nivpols, opts...); err != nil {
		return nil, fmt.Errorf("listing NamespacedImageValidatingPolicies: %w", err)
	}
	policies := make([]kyvernov1.PolicyInterface, 0, len(cpols.Items)+len(pols.Items)+len(vpols.Items)+len(nvpols.Items)+len(gpols.Items)+len(ngpols.Items)+len(mpols.Items)+len(nmpols.Items)+len(ivpols.Items)+len(nivpols.Items))
	for i := range cpols.Items {
		policies = append(policies, &cpols.Items[i])
	}
	for i := range pols.Items {
		policies = append(policies, &pols.Items[i])
	}
	for i := range vpols.Items {
		policies = append(policies, &vpols.Items[i])
	}
	for i := range nvpols.Items {
		policies = append(policies, &nvpols.Items[i])
	}
	for i := range gpols.Items {
		policies = append(policies, &gpols.Items[i])
	}
	for i := range ngpols.Items {
		policies = append(policies, &ngpols.Items[i])
	}
	for i := range mpols.Items {
		policies = append(policies, &mpols.Items[i])
	}
	for i := range nmpols.Items {
		policies = append(policies, &nmpols.Items[i])
	}
	for i := range ivpols.Items {
		policies = append(policies, &ivpols.Items[i])
	}
	for i := range nivpols.Items {
		policies = append(policies, &nivpols.Items[i])
	}
	return policies, nil
}
