package userinfo

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"
)

type bindings struct {
	RoleBindings        []rbacv1.RoleBinding        `json:"roleBindings"`
	ClusterRoleBindings []rbacv1.ClusterRoleBinding `json:"clusterRoleBindings"`
}

func loadBindings(t *testing.T) bindings {
	t.Helper()
	raw, err := os.ReadFile("testdata/bindings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bindings
	if err := yaml.UnmarshalStrict(raw, &b); err != nil {
		t.Fatalf("testdata/bindings.yaml: %v", err)
	}
	return b
}

var boundCases = []struct {
	name               string
	user               authenticationv1.UserInfo
	roles, clusterRole []string
}{
	{
		name:        "user by name, through Role and ClusterRole bindings, duplicates once",
		user:        authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
		roles:       []string{"team-a:deployer", "team-a:editor"},
		clusterRole: []string{"cluster-admin", "system:basic-user", "view"},
	},
	{
		name:        "group member",
		user:        authenticationv1.UserInfo{Username: "bob", Groups: []string{"devs"}},
		roles:       []string{"team-a:deployer"},
		clusterRole: nil,
	},
	{
		name: "service account: namespace defaults to the RoleBinding's, and is required in a ClusterRoleBinding",
		user: authenticationv1.UserInfo{Username: "system:serviceaccount:ci:builder",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"}},
		roles:       []string{"ci:pusher", "team-a:reader"},
		clusterRole: []string{"image-pusher", "system:basic-user"},
	},
	{
		name:  "a user named like a service account's short name is not it",
		user:  authenticationv1.UserInfo{Username: "builder"},
		roles: nil,
	},
	{
		name:  "subjects have no wildcards",
		user:  authenticationv1.UserInfo{Username: "*"},
		roles: []string{"team-a:star"},
	},
	{
		name: "nobody",
		user: authenticationv1.UserInfo{Username: "mallory"},
	},
}

func TestBound(t *testing.T) {
	b := loadBindings(t)
	for _, tc := range boundCases {
		t.Run(tc.name, func(t *testing.T) {
			roles, clusterRoles := Bound(tc.user, b.RoleBindings, b.ClusterRoleBindings)
			if !slices.Equal(roles, tc.roles) {
				t.Errorf("roles = %q, want %q", roles, tc.roles)
			}
			if !slices.Equal(clusterRoles, tc.clusterRole) {
				t.Errorf("clusterRoles = %q, want %q", clusterRoles, tc.clusterRole)
			}
		})
	}
}

// The index lookups find exactly what a scan of every binding finds.
func TestCachedResolverAgreesWithBound(t *testing.T) {
	b := loadBindings(t)
	sch := runtime.NewScheme()
	if err := rbacv1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	builder := fake.NewClientBuilder().WithScheme(sch).
		WithIndex(&rbacv1.RoleBinding{}, subjectIndex, roleBindingKeys).
		WithIndex(&rbacv1.ClusterRoleBinding{}, subjectIndex, clusterRoleBindingKeys)
	for i := range b.RoleBindings {
		builder = builder.WithObjects(&b.RoleBindings[i])
	}
	for i := range b.ClusterRoleBindings {
		builder = builder.WithObjects(&b.ClusterRoleBindings[i])
	}
	r := CachedResolver{Reader: builder.Build()}
	for _, tc := range boundCases {
		t.Run(tc.name, func(t *testing.T) {
			roles, clusterRoles, err := r.Roles(context.Background(), tc.user)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(roles, tc.roles) {
				t.Errorf("roles = %q, want %q", roles, tc.roles)
			}
			if !slices.Equal(clusterRoles, tc.clusterRole) {
				t.Errorf("clusterRoles = %q, want %q", clusterRoles, tc.clusterRole)
			}
		})
	}
}

// Without the index the cache cannot answer, and the error says which
// lookup failed.
func TestCachedResolverErrorNamesTheLookup(t *testing.T) {
	sch := runtime.NewScheme()
	if err := rbacv1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	r := CachedResolver{Reader: fake.NewClientBuilder().WithScheme(sch).Build()}
	_, _, err := r.Roles(context.Background(), authenticationv1.UserInfo{Username: "alice"})
	if err == nil {
		t.Fatal("no error without the index")
	}
	if want := "listing RoleBindings of user alice"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}
