package engine

import (
	"context"
	"errors"
	"slices"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// fakeAuthorizer answers authorizer checks from a list, as RBAC might:
// the first answer whose set fields all match the check decides; none
// matching is no opinion (allowed() false).
type fakeAuthorizer []fakeAuthzAnswer

// fakeAuthzAnswer is one answer of a fakeAuthorizer. Empty fields match
// anything; Groups must all be among the user's, Extra's values equal.
type fakeAuthzAnswer struct {
	User        string              `json:"user"`
	UID         string              `json:"uid"`
	Groups      []string            `json:"groups"`
	Extra       map[string][]string `json:"extra"`
	Verb        string              `json:"verb"`
	Group       *string             `json:"group"`
	Resource    string              `json:"resource"`
	Subresource string              `json:"subresource"`
	Namespace   *string             `json:"namespace"`
	Name        string              `json:"name"`
	Path        string              `json:"path"`
	// Decision is allow or deny; empty is no opinion.
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	// Error, when set, is returned with a deny, as a failed
	// SubjectAccessReview is.
	Error string `json:"error"`
}

func (f fakeAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	for _, ans := range f {
		if !ans.matches(a) {
			continue
		}
		if ans.Error != "" {
			return authorizer.DecisionDeny, ans.Reason, errors.New(ans.Error)
		}
		switch ans.Decision {
		case "allow":
			return authorizer.DecisionAllow, ans.Reason, nil
		case "deny":
			return authorizer.DecisionDeny, ans.Reason, nil
		}
		return authorizer.DecisionNoOpinion, ans.Reason, nil
	}
	return authorizer.DecisionNoOpinion, "no rule allows it", nil
}

func (ans *fakeAuthzAnswer) matches(a authorizer.Attributes) bool {
	u := a.GetUser()
	eq := func(want, got string) bool { return want == "" || want == got }
	if !eq(ans.User, u.GetName()) || !eq(ans.UID, u.GetUID()) || !eq(ans.Verb, a.GetVerb()) ||
		!eq(ans.Resource, a.GetResource()) || !eq(ans.Subresource, a.GetSubresource()) ||
		!eq(ans.Name, a.GetName()) || !eq(ans.Path, a.GetPath()) {
		return false
	}
	if (ans.Group != nil && *ans.Group != a.GetAPIGroup()) || (ans.Namespace != nil && *ans.Namespace != a.GetNamespace()) {
		return false
	}
	if ans.Resource != "" && !a.IsResourceRequest() {
		return false
	}
	for _, g := range ans.Groups {
		if !slices.Contains(u.GetGroups(), g) {
			return false
		}
	}
	for k, v := range ans.Extra {
		if !slices.Equal(u.GetExtra()[k], v) {
			return false
		}
	}
	return true
}
