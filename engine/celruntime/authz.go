package celruntime

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/runtime/schema"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/charter-dev/charter/engine/review"
)

// The CEL `authorizer` of validate.cel rules (and of any rule's
// celPreconditions) is Kubernetes' own authz library, bound as
// ValidatingAdmissionPolicy binds it: `authorizer` checks what the
// requesting user (request.userInfo) may do, `authorizer.requestResource`
// is the check of the request's own resource. The checks go to the
// authorizer the caller hands in Loaders.Authorizer (the cluster's
// SubjectAccessReviews); without one, as in the CLI and background scans,
// the variable is unbound and a rule reading it ends in error.

// errNoRequestingUser is the error of a check for the requesting user of
// a request that has none.
var errNoRequestingUser = errors.New("the request has no user to authorize (request.userInfo is empty)")

// authorizerValue returns the value of `authorizer` (name
// plugincel.AuthorizerVarName) or `authorizer.requestResource` for this
// activation, or nil when the evaluation has no authorizer.
func (a *Activation) authorizerValue(name string) ref.Val {
	in := a.In.view
	l := in.Opts.Loaders.Authorizer
	if l == nil {
		return nil
	}
	if a.authorizer == nil {
		u := requestingUser(in.Req)
		bound := boundAuthorizer{ctx: in.Ctx, authorizer: l, scope: a.Scope}
		a.authorizer = library.NewAuthorizerVal(u, bound)
		a.requestResourceAuthorizer = library.NewResourceAuthorizerVal(u, bound, requestResource{in})
	}
	if name == plugincel.AuthorizerVarName {
		return a.authorizer
	}
	return a.requestResourceAuthorizer
}

// requestingUser is request.userInfo as the authorizer sees it.
func requestingUser(req *review.Request) user.Info {
	u := req.UserInfo
	var extra map[string][]string
	if len(u.Extra) > 0 {
		extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = v
		}
	}
	return &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}
}

// boundAuthorizer asks the caller's authorizer with the request's context
// (the library asks with context.TODO, which no admission deadline would
// bound), refuses a check without a user, and keeps a namespaced policy's
// checks in its own namespace: its answers would otherwise tell the
// policy's author what a user may do in other tenants' namespaces.
type boundAuthorizer struct {
	ctx        context.Context
	authorizer authorizer.UnconditionalAuthorizer
	// scope is the namespace of a namespaced policy, "" for a cluster
	// policy.
	scope string
}

func (b boundAuthorizer) Authorize(_ context.Context, attr authorizer.Attributes) (authorizer.Decision, string, error) {
	if u := attr.GetUser(); u == nil || (u.GetName() == "" && len(u.GetGroups()) == 0) {
		return authorizer.DecisionDeny, "", errNoRequestingUser
	}
	if b.scope != "" && (!attr.IsResourceRequest() || attr.GetNamespace() != b.scope) {
		return authorizer.DecisionDeny, "", OutOfScope("check authorization in", b.scope, attr.GetNamespace())
	}
	return b.authorizer.Authorize(b.ctx, attr)
}

// requestResource is the request's resource as authorizer.requestResource
// checks it: its group and resource, subresource, namespace and name.
type requestResource struct{ in *review.View }

func (r requestResource) GetName() string      { return r.in.Res.Name }
func (r requestResource) GetNamespace() string { return r.in.Res.Namespace }
func (r requestResource) GetResource() schema.GroupVersionResource {
	return r.in.Req.Resource
}
func (r requestResource) GetSubresource() string { return r.in.Req.SubResource }

// OutOfScope is the error of a namespaced policy reaching outside its
// namespace (other; "" for the cluster scope).
func OutOfScope(verb, own, other string) error {
	if other == "" {
		return fmt.Errorf("a namespaced policy cannot %s the cluster scope; it acts in namespace %q only", verb, own)
	}
	return fmt.Errorf("a namespaced policy can only %s its own namespace %q, not %q", verb, own, other)
}
