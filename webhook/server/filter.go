package server

import (
	"fmt"
	"strings"

	"github.com/charter-dev/charter/engine/wildcard"
)

// ResourceFilter skips admission for matching requests, in Kyverno's
// resourceFilters format "[Kind[/subresource],namespace,name]" with glob
// wildcards (admission-reports.md §2.5). "Kind" alone matches only requests
// without a subresource, "Kind/?*" any subresource, "*/*" everything.
//
// Group, which Kyverno's format cannot say, narrows a filter to one API
// group; "" matches any.
type ResourceFilter struct {
	Group, Kind, SubResource, Namespace, Name string
}

// ParseResourceFilters parses "[Kind,ns,name] [Kind/sub,ns,name] ...".
// Missing fields are empty and match only empty values.
func ParseResourceFilters(s string) ([]ResourceFilter, error) {
	var out []ResourceFilter
	rest := strings.TrimSpace(s)
	for rest != "" {
		if rest[0] != '[' {
			return nil, fmt.Errorf("resource filter %q: expected '['", rest)
		}
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return nil, fmt.Errorf("resource filter %q: missing ']'", rest)
		}
		fields := strings.Split(rest[1:end], ",")
		if len(fields) > 3 {
			return nil, fmt.Errorf("resource filter %q: more than 3 fields", rest[:end+1])
		}
		for len(fields) < 3 {
			fields = append(fields, "")
		}
		kind, sub, _ := strings.Cut(strings.TrimSpace(fields[0]), "/")
		if kind == "" {
			return nil, fmt.Errorf("resource filter %q: empty kind", rest[:end+1])
		}
		out = append(out, ResourceFilter{Kind: kind, SubResource: sub,
			Namespace: strings.TrimSpace(fields[1]), Name: strings.TrimSpace(fields[2])})
		rest = strings.TrimSpace(rest[end+1:])
	}
	return out, nil
}

// DefaultResourceFilters are the request-level exclusions charter applies
// by default: Kyverno's chart defaults that are not about Kyverno's own
// objects (those are covered by charter's namespace), plus charter's
// namespace. Requests in these namespaces normally never arrive, since
// the webhook configurations' namespaceSelector leaves them out.
func DefaultResourceFilters(charterNamespace string) []ResourceFilter {
	list := "[Event,*,*] [*/*,kube-system,*] [*/*,kube-public,*] [*/*,kube-node-lease,*] " +
		"[Node,*,*] [Node/?*,*,*] [APIService,*,*] [APIService/?*,*,*] [TokenReview,*,*] " +
		"[SubjectAccessReview,*,*] [SelfSubjectAccessReview,*,*] [Binding,*,*] [Pod/binding,*,*] " +
		"[ReplicaSet,*,*] [ReplicaSet/?*,*,*] [PolicyReport,*,*] [ClusterPolicyReport,*,*] [UpdateRequest,*,*]"
	if charterNamespace != "" {
		list = "[*/*," + charterNamespace + ",*] " + list
	}
	filters, err := ParseResourceFilters(list)
	if err != nil {
		panic("server: default resource filters: " + err.Error())
	}
	// charter's own writes of OpenReports (--reports-api): evaluating
	// them would report on reports. By group, unlike Kyverno's
	// PolicyReport filters: other APIs have kinds named Report too.
	return append(filters,
		ResourceFilter{Group: "openreports.io", Kind: "Report", Namespace: "*", Name: "*"},
		ResourceFilter{Group: "openreports.io", Kind: "ClusterReport", Namespace: "*", Name: "*"})
}

// matches reports whether the filter covers a request. For Namespace
// objects the namespace field also matches the Namespace's own name, so
// [*/*,kube-system,*] covers the kube-system Namespace too.
func (f ResourceFilter) matches(group, kind, subResource, namespace, name string) bool {
	if f.Group != "" && f.Group != group {
		return false
	}
	if f.Kind == "*" && f.SubResource == "*" {
		// every kind and every subresource, including none
	} else {
		if !wildcard.Match(f.Kind, kind) {
			return false
		}
		if f.SubResource == "" {
			if subResource != "" {
				return false
			}
		} else if !wildcard.Match(f.SubResource, subResource) {
			return false
		}
	}
	nsMatch := wildcard.Match(f.Namespace, namespace)
	if !nsMatch && kind == "Namespace" && namespace == "" {
		nsMatch = wildcard.Match(f.Namespace, name)
	}
	return nsMatch && wildcard.Match(f.Name, name)
}

// filtered reports whether any filter covers the request.
func filtered(filters []ResourceFilter, group, kind, subResource, namespace, name string) bool {
	for _, f := range filters {
		if f.matches(group, kind, subResource, namespace, name) {
			return true
		}
	}
	return false
}
