package engine

import (
	"github.com/charter-dev/charter/engine/review"
)

// A namespaced policy (kyverno.io/v1 Policy, and any later namespaced
// policy kind) acts only in its own namespace. Namespace owners may write
// such policies, so anything else would let one tenant block or rewrite
// every other tenant's workloads. The engine decides it, so the CLI,
// admission, the reports controller and every later controller agree:
//
//   - a request is seen by a namespaced policy only when its object (and
//     its old object) is in the policy's namespace; a cluster-scoped
//     object, a Namespace included, never is (Kyverno's
//     checkNamespacedPolicy in pkg/engine/internal);
//   - a mutate-existing target or a generated object outside the
//     namespace is refused when the policy is compiled, with the field
//     path, when the rule names it outright, and is an error result when
//     a variable resolves there;
//   - mutate-existing targets are looked up in the policy's namespace
//     only (targetQuery), and clone sources are read from it only;
//   - configMap and apiCall (urlPath) context entries read the policy's
//     namespace only: charter reads them with its own identity.

// Namespace returns the namespace the policy acts in: its own for a
// namespaced policy, "" for a cluster-wide one.
func (p *Policy) Namespace() string { return p.namespace }

// InScope reports whether the policy may act on an object in namespace
// ("" for a cluster-scoped object). Controllers that pick the objects to
// evaluate themselves (lists, cleanup) use it; evaluation checks it
// already.
func (p *Policy) InScope(namespace string) bool { return review.InScope(p.namespace, namespace) }

// scopes reports whether the policy may see the request.
func (p *Policy) scopes(in *requestView) bool { return p.InScope(in.Scope) }
