package userinfo

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// subjectIndex is the field index over binding subjects: one key per
// subject, in the form subjectKeys produces for a user.
const subjectIndex = "charter.dev/rbac-subject"

// AddIndexes registers the subject index on RoleBindings and
// ClusterRoleBindings with the manager's cache. Call it before the manager
// starts; it also makes the cache watch both kinds from the start.
func AddIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &rbacv1.RoleBinding{}, subjectIndex, roleBindingKeys); err != nil {
		return fmt.Errorf("indexing RoleBindings by subject: %w", err)
	}
	if err := indexer.IndexField(ctx, &rbacv1.ClusterRoleBinding{}, subjectIndex, clusterRoleBindingKeys); err != nil {
		return fmt.Errorf("indexing ClusterRoleBindings by subject: %w", err)
	}
	return nil
}

func roleBindingKeys(o client.Object) []string {
	rb := o.(*rbacv1.RoleBinding)
	return bindingKeys(rb.Subjects, rb.Namespace)
}

func clusterRoleBindingKeys(o client.Object) []string {
	return bindingKeys(o.(*rbacv1.ClusterRoleBinding).Subjects, "")
}

// bindingKeys are the index keys of a binding's subjects.
func bindingKeys(subjects []rbacv1.Subject, namespace string) []string {
	keys := make([]string, 0, len(subjects))
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			keys = append(keys, s.Kind+":"+s.Name)
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = namespace
			}
			if ns != "" {
				// A service account is bound by its username.
				keys = append(keys, rbacv1.UserKind+":"+serviceAccountPrefix+ns+":"+s.Name)
			}
		}
	}
	return keys
}

// subjectKeys are the index keys under which a binding of the user is
// found: the username and each group.
func subjectKeys(user authenticationv1.UserInfo) []string {
	keys := make([]string, 0, 1+len(user.Groups))
	if user.Username != "" {
		keys = append(keys, rbacv1.UserKind+":"+user.Username)
	}
	for _, g := range user.Groups {
		keys = append(keys, rbacv1.GroupKind+":"+g)
	}
	return keys
}

// CachedResolver resolves roles from an informer cache indexed by
// AddIndexes (the manager's cache), so a request costs a few index lookups
// and no API call. It needs list and watch on rolebindings and
// clusterrolebindings.
type CachedResolver struct {
	// Reader is the cache; reads of another reader fail for want of the
	// index.
	Reader client.Reader
}

var _ Resolver = CachedResolver{}

// Roles implements Resolver.
func (c CachedResolver) Roles(ctx context.Context, user authenticationv1.UserInfo) ([]string, []string, error) {
	var rbs []rbacv1.RoleBinding
	var crbs []rbacv1.ClusterRoleBinding
	for _, key := range subjectKeys(user) {
		// The objects are only read, so the cache's own copies will do.
		var rbl rbacv1.RoleBindingList
		if err := c.Reader.List(ctx, &rbl, client.MatchingFields{subjectIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, fmt.Errorf("listing RoleBindings of %s: %w", describe(key), err)
		}
		rbs = append(rbs, rbl.Items...)
		var crbl rbacv1.ClusterRoleBindingList
		if err := c.Reader.List(ctx, &crbl, client.MatchingFields{subjectIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, fmt.Errorf("listing ClusterRoleBindings of %s: %w", describe(key), err)
		}
		crbs = append(crbs, crbl.Items...)
	}
	roles, clusterRoles := Bound(user, rbs, crbs)
	return roles, clusterRoles, nil
}

// describe turns an index key back into words for an error.
func describe(key string) string {
	kind, name, _ := strings.Cut(key, ":")
	return strings.ToLower(kind) + " " + name
}
