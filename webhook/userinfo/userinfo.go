// Package userinfo resolves the Roles and ClusterRoles bound to the user
// behind an admission request, so that a rule's match.any[].roles and
// clusterRoles, and the request.roles and request.clusterRoles variables,
// work at admission as they do in Kyverno.
//
// A RoleBinding contributes "<namespace>:<role>" to the roles when it binds
// a Role, and the ClusterRole's name to the clusterRoles when it binds a
// ClusterRole; a ClusterRoleBinding contributes its ClusterRole. A binding
// applies to the user when one of its subjects is the user by name, one of
// the user's groups, or the user's service account
// (system:serviceaccount:<ns>:<name>, the namespace defaulting to the
// RoleBinding's own). Matching is exact: RBAC subjects have no wildcards.
package userinfo

import (
	"context"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Resolver returns the Roles ("namespace:name") and ClusterRoles bound to
// a user. An error means the bindings could not be read; the caller
// refuses the request rather than evaluate rules without them.
type Resolver interface {
	Roles(ctx context.Context, user authenticationv1.UserInfo) (roles, clusterRoles []string, err error)
}

// serviceAccountPrefix starts the username of every service account.
const serviceAccountPrefix = "system:serviceaccount:"

// Bound returns the roles and cluster roles the bindings grant the user,
// each sorted and without duplicates.
func Bound(user authenticationv1.UserInfo, roleBindings []rbacv1.RoleBinding, clusterRoleBindings []rbacv1.ClusterRoleBinding) (roles, clusterRoles []string) {
	for i := range roleBindings {
		rb := &roleBindings[i]
		if !Binds(rb.Subjects, rb.Namespace, user) {
			continue
		}
		switch rb.RoleRef.Kind {
		case "Role":
			roles = append(roles, rb.Namespace+":"+rb.RoleRef.Name)
		case "ClusterRole":
			clusterRoles = append(clusterRoles, rb.RoleRef.Name)
		}
	}
	for i := range clusterRoleBindings {
		crb := &clusterRoleBindings[i]
		if crb.RoleRef.Kind == "ClusterRole" && Binds(crb.Subjects, "", user) {
			clusterRoles = append(clusterRoles, crb.RoleRef.Name)
		}
	}
	return sortedSet(roles), sortedSet(clusterRoles)
}

// Binds reports whether one of a binding's subjects is the user. namespace
// is the RoleBinding's namespace (empty for a ClusterRoleBinding): a
// ServiceAccount subject without a namespace means one in it.
func Binds(subjects []rbacv1.Subject, namespace string, user authenticationv1.UserInfo) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == user.Username {
				return true
			}
		case rbacv1.GroupKind:
			if slices.Contains(user.Groups, s.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = namespace
			}
			if ns != "" && user.Username == serviceAccountPrefix+ns+":"+s.Name {
				return true
			}
		}
	}
	return false
}

func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	return slices.Compact(s)
}
