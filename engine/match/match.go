// Package match decides whether a rule's match and exclude blocks select a
// resource and request (Kyverno's MatchResources semantics).
//
// A block lists filters under any (one must match), all (every one must
// match) or, in the older form, one filter inline. Inside a filter every
// criterion that is set must hold: kinds, name/names, namespaces,
// annotations, selector, namespaceSelector, operations, roles, clusterRoles
// and subjects. Names, namespaces and annotation keys and values may hold the
// wildcards * and ?.
package match

import (
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/wildcard"
)

// Resource is what match and exclude look at: the object's identity and
// metadata, and who is asking for what.
type Resource struct {
	// Kind is the kind of the resource; for a subresource request it is the
	// parent's kind (Pod for pods/exec).
	Kind schema.GroupVersionKind
	// SubResource is the requested subresource ("exec"), or empty.
	SubResource string

	Name        string
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
	// NamespaceLabels returns the labels of the resource's namespace. It is
	// called only when a namespaceSelector needs them; nil means none.
	NamespaceLabels func() map[string]string

	Operation    kyvernov1.AdmissionOperation
	UserInfo     authenticationv1.UserInfo
	Roles        []string
	ClusterRoles []string
}

// Matches reports whether the match block selects the resource. An empty
// block selects nothing.
func Matches(m *kyvernov1.MatchResources, r *Resource) bool {
	filters, all := m.Filters()
	if len(filters) == 0 {
		return false
	}
	return combine(filters, all, r)
}

// Excludes reports whether the exclude block removes the resource. A nil or
// empty block excludes nothing.
func Excludes(m *kyvernov1.MatchResources, r *Resource) bool {
	filters, all := m.Filters()
	if len(filters) == 0 {
		return false
	}
	return combine(filters, all, r)
}

// Selects reports whether a rule with these blocks applies: match selects
// the resource and exclude does not.
func Selects(match, exclude *kyvernov1.MatchResources, r *Resource) bool {
	return Matches(match, r) && !Excludes(exclude, r)
}

func combine(filters kyvernov1.ResourceFilters, all bool, r *Resource) bool {
	for i := range filters {
		ok := Filter(&filters[i], r)
		if all && !ok {
			return false
		}
		if !all && ok {
			return true
		}
	}
	return all
}

// Filter reports whether every criterion set in the filter holds. A filter
// with no criterion matches nothing, so an empty entry in a list never
// selects everything by accident.
func Filter(f *kyvernov1.ResourceFilter, r *Resource) bool {
	if f.IsEmpty() {
		return false
	}
	return description(&f.ResourceDescription, r) && user(&f.UserInfo, r)
}

func description(d *kyvernov1.ResourceDescription, r *Resource) bool {
	if len(d.Kinds) > 0 && !Kinds(d.Kinds, r.Kind, r.SubResource) {
		return false
	}
	if d.Name != "" && !wildcard.Match(d.Name, r.Name) {
		return false
	}
	if len(d.Names) > 0 && !anyWildcard(d.Names, r.Name) {
		return false
	}
	if len(d.Namespaces) > 0 && !anyWildcard(d.Namespaces, NamespaceOf(r)) {
		return false
	}
	if len(d.Annotations) > 0 && !annotations(d.Annotations, r.Annotations) {
		return false
	}
	if d.Selector != nil && !Selector(d.Selector, r.Labels) {
		return false
	}
	if d.NamespaceSelector != nil {
		var nsLabels map[string]string
		if r.NamespaceLabels != nil {
			nsLabels = r.NamespaceLabels()
		}
		if !Selector(d.NamespaceSelector, nsLabels) {
			return false
		}
	}
	if len(d.Operations) > 0 {
		op := r.Operation
		if op == "" {
			op = kyvernov1.Create
		}
		found := false
		for _, o := range d.Operations {
			if o == op {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// NamespaceOf is the name a filter's namespaces are matched against: the
// resource's namespace, or, for a Namespace object, its own name.
func NamespaceOf(r *Resource) string {
	if r.Kind.Kind == "Namespace" && r.Kind.Group == "" {
		return r.Name
	}
	return r.Namespace
}

func user(u *kyvernov1.UserInfo, r *Resource) bool {
	if len(u.Roles) > 0 && !intersects(u.Roles, r.Roles) {
		return false
	}
	if len(u.ClusterRoles) > 0 && !intersects(u.ClusterRoles, r.ClusterRoles) {
		return false
	}
	if len(u.Subjects) > 0 && !Subjects(u.Subjects, r.UserInfo) {
		return false
	}
	return true
}

// Subjects reports whether the user is one of the subjects: a User by name,
// a member of a Group, or a ServiceAccount (system:serviceaccount:<ns>:<name>).
// Names may hold wildcards.
func Subjects(subjects []rbacv1.Subject, u authenticationv1.UserInfo) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if u.Username == "system:serviceaccount:"+s.Namespace+":"+s.Name {
				return true
			}
		case rbacv1.GroupKind:
			if anyMatch(s.Name, u.Groups) {
				return true
			}
		case rbacv1.UserKind:
			if wildcard.Match(s.Name, u.Username) {
				return true
			}
		}
	}
	return false
}

// Kinds reports whether one of the kind selectors names the kind and
// subresource. Selectors take the forms Kind, Kind/subresource,
// version/Kind, group/version/Kind, with an optional trailing /subresource,
// and * anywhere as a wildcard. A selector without a subresource matches
// only requests for the resource itself.
func Kinds(selectors []string, gvk schema.GroupVersionKind, subresource string) bool {
	for _, s := range selectors {
		if s == "*" {
			return true
		}
		if !strings.Contains(s, gvk.Kind) && !wildcard.ContainsWildcard(s) {
			// Without wildcards the selector's kind is part of it as
			// written and must equal the resource's: a Pod review skips
			// the autogen rules' apps/v1/Deployment and their like here.
			continue
		}
		if isPlainKind(s) {
			// ParseKind would give {*, *, s, ""}: skip the parse (a Pod
			// review meets some 130
			// kind selectors of the Pod Security policies and their
			// autogen rules).
			if wildcard.Match(s, gvk.Kind) && (subresource == "" || isPodEphemeralContainers(gvk, subresource)) {
				return true
			}
			continue
		}
		k := ParseKind(s)
		if !wildcard.Match(k.Group, gvk.Group) || !wildcard.Match(k.Version, gvk.Version) || !wildcard.Match(k.Kind, gvk.Kind) {
			continue
		}
		if wildcard.Match(k.SubResource, subresource) {
			return true
		}
		// A Pod rule also covers pods/ephemeralcontainers, whose object is
		// the Pod itself: otherwise `kubectl debug` would add a container
		// no Pod policy checks. Kyverno makes the same exception for v1
		// Pods, and its webhooks register the subresource with pods.
		if k.SubResource == "" && isPodEphemeralContainers(gvk, subresource) {
			return true
		}
	}
	return false
}

// isPlainKind reports whether a kind selector is a bare kind, without
// group, version or subresource.
func isPlainKind(s string) bool { return strings.IndexAny(s, "/.") < 0 }

func isPodEphemeralContainers(gvk schema.GroupVersionKind, subresource string) bool {
	return subresource == "ephemeralcontainers" && gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Pod"
}

// KindSelector is a parsed entry of `kinds`.
type KindSelector struct {
	Group, Version, Kind, SubResource string
}

// ParseKind parses a kind selector: Kind, version/Kind, group/version/Kind,
// each optionally followed by /subresource, where the subresource may also
// be written Kind.subresource. Group and version default to "*". A first
// part that looks like a version (v1, v2beta1, or ending in *) is a version,
// which tells version/Kind/sub from group/version/Kind.
func ParseKind(s string) KindSelector {
	// The parts are substrings of s, so a parse allocates nothing: Kinds
	// parses on every request rather than keep a process-wide memo.
	var parts [4]string
	n, rest, more := 0, s, true
	for more && n < len(parts)-1 {
		parts[n], rest, more = strings.Cut(rest, "/")
		n++
	}
	if more {
		parts[n] = rest // group/version/Kind/sub/...: the rest is the subresource
		n++
	}
	var k KindSelector
	switch n {
	case 1:
		k = KindSelector{Group: "*", Version: "*", Kind: parts[0]}
	case 2:
		if isVersion(parts[0]) {
			k = KindSelector{Group: "*", Version: parts[0], Kind: parts[1]}
		} else {
			k = KindSelector{Group: "*", Version: "*", Kind: parts[0], SubResource: parts[1]}
		}
	case 3:
		if isVersion(parts[0]) {
			k = KindSelector{Group: "*", Version: parts[0], Kind: parts[1], SubResource: parts[2]}
		} else {
			k = KindSelector{Group: parts[0], Version: parts[1], Kind: parts[2]}
		}
	default:
		k = KindSelector{Group: parts[0], Version: parts[1], Kind: parts[2], SubResource: parts[3]}
	}
	if k.SubResource == "" {
		if kind, sub, ok := strings.Cut(k.Kind, "."); ok {
			k.Kind, k.SubResource = kind, sub
		}
	}
	return k
}

func isVersion(s string) bool {
	if strings.HasSuffix(s, "*") {
		return true
	}
	return len(s) >= 2 && s[0] == 'v' && s[1] >= '0' && s[1] <= '9'
}

// Selector reports whether the labels satisfy the selector. Values in
// matchLabels may hold wildcards; an invalid selector matches nothing.
func Selector(sel *metav1.LabelSelector, lbls map[string]string) bool {
	if hasWildcardLabels(sel) {
		for k, v := range sel.MatchLabels {
			if !anyLabel(k, v, lbls) {
				return false
			}
		}
		sel = &metav1.LabelSelector{MatchExpressions: sel.MatchExpressions}
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(lbls))
}

func hasWildcardLabels(sel *metav1.LabelSelector) bool {
	for k, v := range sel.MatchLabels {
		if wildcard.ContainsWildcard(k) || wildcard.ContainsWildcard(v) {
			return true
		}
	}
	return false
}

func anyLabel(k, v string, lbls map[string]string) bool {
	for lk, lv := range lbls {
		if wildcard.Match(k, lk) && wildcard.Match(v, lv) {
			return true
		}
	}
	return false
}

func annotations(want, have map[string]string) bool {
	for k, v := range want {
		if !anyLabel(k, v, have) {
			return false
		}
	}
	return true
}

func anyWildcard(patterns []string, s string) bool {
	for _, p := range patterns {
		if wildcard.Match(p, s) {
			return true
		}
	}
	return false
}

func anyMatch(pattern string, values []string) bool {
	for _, v := range values {
		if wildcard.Match(pattern, v) {
			return true
		}
	}
	return false
}

func intersects(want, have []string) bool {
	for _, w := range want {
		for _, h := range have {
			if w == h {
				return true
			}
		}
	}
	return false
}
