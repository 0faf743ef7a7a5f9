package background

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/charter-dev/charter/clusterstate/impersonate"
)

// ForbiddenError is a write (or read) charter's background controller is
// not allowed to make: it names exactly the permission that is missing,
// since "generate does nothing" with no trace is Kyverno's most reported
// complaint (background-cleanup.md §5.4).
type ForbiddenError struct {
	Verb      string
	Group     string
	Resource  string
	Kind      string
	Namespace string
	// ServiceAccount ("namespace/name") is set when the request was made
	// for a namespaced policy, as that ServiceAccount (impersonate.go);
	// empty when charter made it as itself.
	ServiceAccount string
	// MissingServiceAccount: ServiceAccount does not exist, so nothing
	// was sent.
	MissingServiceAccount bool
	Err                   error
}

func (e *ForbiddenError) Error() string {
	group := e.Group
	if group == "" {
		group = "core"
	}
	where := "cluster-wide"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	what := fmt.Sprintf("%s %s (group %s, resource %s) %s", e.Verb, e.Kind, group, e.Resource, where)
	if e.ServiceAccount != "" {
		return fmt.Sprintf("forbidden: %s %s; %s (%v)", serviceAccountSubject(e.ServiceAccount, e.MissingServiceAccount), what, serviceAccountHint(e.ServiceAccount, e.MissingServiceAccount), e.Err)
	}
	return fmt.Sprintf("forbidden: charter's background controller may not %s; grant it with a ClusterRole labelled %s: \"true\" (%v)",
		what, AggregateLabel, e.Err)
}

// serviceAccountSubject says who was refused when a namespaced policy's
// ServiceAccount was ("namespace/name"), up to the verb.
func serviceAccountSubject(sa string, missing bool) string {
	if missing {
		return "ServiceAccount " + sa + ", as which charter acts for the namespaced policies of its namespace, does not exist, so it may not"
	}
	return "ServiceAccount " + sa + ", as which charter acts for the namespaced policies of its namespace, may not"
}

// serviceAccountHint says how to let a namespaced policy's ServiceAccount
// do what it was refused.
func serviceAccountHint(sa string, missing bool) string {
	ns, _, _ := strings.Cut(sa, "/")
	if missing {
		return "create it and bind it a Role in namespace " + ns + " that allows it"
	}
	return "bind it a Role in namespace " + ns + " that allows it (charter's own rights are never used for a namespaced policy)"
}

func (e *ForbiddenError) Unwrap() error { return e.Err }

// AggregateLabel is the label of ClusterRoles whose rules charter's
// background controller gets (config/rbac/background): Kyverno's
// rbac.kyverno.io/aggregate-to-background-controller, under charter.dev.
const AggregateLabel = "rbac.charter.dev/aggregate-to-background"

// describe turns an API error into one that names what was attempted on
// which object (name "" for a list); Forbidden becomes a
// *ForbiddenError, which names the permission rather than the object.
func (c *Controller) describe(err error, verb string, mapping *meta.RESTMapping, namespace, name string) error {
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		fe := &ForbiddenError{Verb: verb, Group: mapping.Resource.Group, Resource: mapping.Resource.Resource,
			Kind: mapping.GroupVersionKind.Kind, Namespace: namespace, Err: err}
		if ie, ok := impersonate.As(err); ok {
			fe.ServiceAccount, fe.MissingServiceAccount, fe.Err = ie.ServiceAccount(), ie.Missing, ie.Err
		}
		return fe
	}
	what := objectName(namespace, name)
	switch {
	case name != "":
	case namespace != "":
		what = "in namespace " + namespace
	default:
		what = "cluster-wide"
	}
	return fmt.Errorf("%s %s %s: %w", verb, mapping.GroupVersionKind.Kind, what, err)
}

// contains reports whether every field of want is in got with the same
// value: a downstream object that holds everything the rule wants (and
// whatever the API server or other managers added) needs no write.
// Numbers are compared after a JSON round trip, since the rule's output
// and the API server's answer spell them differently.
func contains(got, want map[string]any) bool {
	g, w := normalize(got), normalize(want)
	return containsValue(g, w)
}

func normalize(v map[string]any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

func containsValue(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				// An empty map or list the API server drops is no drift.
				if isEmpty(wv) {
					continue
				}
				return false
			}
			if !containsValue(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return len(w) == 0 && got == nil
		}
		for i := range w {
			if !containsValue(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(got, want)
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	case nil:
		return true
	}
	return false
}
