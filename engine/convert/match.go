package convert

import (
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/wildcard"
)

// groupVersions are the API group and version of the kinds policies
// usually name without one; other plain kinds match any group and
// version, as Kyverno matches a plain kind.
var groupVersions = map[string][2]string{
	"Pod": {"", "v1"}, "Service": {"", "v1"}, "ConfigMap": {"", "v1"}, "Secret": {"", "v1"},
	"Namespace": {"", "v1"}, "ServiceAccount": {"", "v1"}, "PersistentVolumeClaim": {"", "v1"},
	"PersistentVolume": {"", "v1"}, "Node": {"", "v1"}, "Endpoints": {"", "v1"},
	"ReplicationController": {"", "v1"}, "LimitRange": {"", "v1"}, "ResourceQuota": {"", "v1"},
	"Deployment": {"apps", "v1"}, "DaemonSet": {"apps", "v1"}, "StatefulSet": {"apps", "v1"}, "ReplicaSet": {"apps", "v1"},
	"Job": {"batch", "v1"}, "CronJob": {"batch", "v1"},
	"Ingress": {"networking.k8s.io", "v1"}, "NetworkPolicy": {"networking.k8s.io", "v1"}, "IngressClass": {"networking.k8s.io", "v1"},
	"Role": {"rbac.authorization.k8s.io", "v1"}, "RoleBinding": {"rbac.authorization.k8s.io", "v1"},
	"ClusterRole": {"rbac.authorization.k8s.io", "v1"}, "ClusterRoleBinding": {"rbac.authorization.k8s.io", "v1"},
	"PodDisruptionBudget": {"policy", "v1"}, "StorageClass": {"storage.k8s.io", "v1"},
	"CustomResourceDefinition":       {"apiextensions.k8s.io", "v1"},
	"ValidatingWebhookConfiguration": {"admissionregistration.k8s.io", "v1"},
	"MutatingWebhookConfiguration":   {"admissionregistration.k8s.io", "v1"},
	"PriorityClass":                  {"scheduling.k8s.io", "v1"}, "RuntimeClass": {"node.k8s.io", "v1"},
	"HorizontalPodAutoscaler": {"autoscaling", "*"},
}

// kindRule turns a Kyverno kind selector (Kind, Kind/subresource,
// version/Kind, group/version/Kind) into a resource rule.
func kindRule(sel string) (admissionregistrationv1.NamedRuleWithOperations, error) {
	var rule admissionregistrationv1.NamedRuleWithOperations
	parts := strings.Split(sel, "/")
	wildVersion := len(parts) == 3 && parts[1] == "*" && !strings.ContainsAny(parts[0]+parts[2], "*?")
	if sel == "*" || strings.ContainsAny(sel, "*?") && !wildVersion {
		return rule, cannot("kind %q: wildcard kinds have no resource rule", sel)
	}
	var group, version, kind, sub string
	switch len(parts) {
	case 1:
		kind = parts[0]
	case 2:
		// Pod/exec or v1/Pod.
		if parts[0] != "" && parts[0][0] >= 'A' && parts[0][0] <= 'Z' {
			kind, sub = parts[0], parts[1]
		} else {
			version, kind = parts[0], parts[1]
		}
	case 3:
		group, version, kind = parts[0], parts[1], parts[2]
	default:
		return rule, cannot("kind %q", sel)
	}
	if strings.Contains(kind, ".") {
		return rule, cannot("kind %q with a subresource after a dot", sel)
	}
	if len(parts) == 1 || (len(parts) == 2 && sub != "") {
		if gv, ok := groupVersions[kind]; ok {
			group, version = gv[0], gv[1]
		} else {
			group, version = "*", "*"
		}
	} else if len(parts) == 2 {
		group = ""
	}
	resource := match.ResourceForKind(kind)
	if sub != "" {
		resource += "/" + sub
	}
	rule.APIGroups, rule.APIVersions, rule.Resources = []string{group}, []string{version}, []string{resource}
	return rule, nil
}

func operations(ops []kyvernov1.AdmissionOperation) []admissionregistrationv1.OperationType {
	if len(ops) == 0 {
		return []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	}
	var out []admissionregistrationv1.OperationType
	for _, o := range ops {
		out = append(out, admissionregistrationv1.OperationType(o))
	}
	return out
}

// filters returns a MatchResources' resource filters and whether they
// combine with all.
func filters(m *kyvernov1.MatchResources) (kyvernov1.ResourceFilters, bool) {
	if m == nil {
		return nil, false
	}
	return m.Filters()
}

// matchConstraints converts the rule's match and exclude. Kinds become
// resource rules (merged where the filters differ only in kinds); names,
// selectors and namespaces become resourceNames, objectSelector and a
// namespaceSelector on kubernetes.io/metadata.name; what needs a test on
// the request becomes a matchCondition. It returns the kinds matched.
func matchConstraints(r *kyvernov1.Rule, out *convertedRule) ([]string, error) {
	fs, all := filters(&r.MatchResources)
	if len(fs) == 0 {
		return nil, cannot("match has no resources")
	}
	if all && len(fs) > 1 {
		return nil, cannot("match.all with more than one filter")
	}
	mr := &admissionregistrationv1.MatchResources{}
	var kinds []string
	var shared *kyvernov1.ResourceFilter
	differ := false
	for i := range fs {
		f := fs[i]
		rest := f
		rest.ResourceDescription.Kinds, rest.ResourceDescription.Operations = nil, nil
		if shared == nil {
			shared = &rest
		} else if !sameFilter(*shared, rest) {
			differ = true
		}
		for _, k := range f.ResourceDescription.Kinds {
			rule, err := kindRule(k)
			if err != nil {
				return nil, err
			}
			rule.Operations = operations(f.ResourceDescription.Operations)
			mr.ResourceRules = mergeRule(mr.ResourceRules, rule)
			kinds = append(kinds, lastPart(k))
		}
	}
	if len(mr.ResourceRules) == 0 {
		return nil, cannot("match names no kinds")
	}
	if differ {
		// Filters that differ in more than kinds: the resource rules
		// select every kind, and a matchCondition which filter applies.
		var alts []expr
		for _, f := range fs {
			c, err := filterCondition(f)
			if err != nil {
				return nil, wrap(err, "match")
			}
			alts = append(alts, c)
		}
		addCondition(out, "match", or(alts...))
		if err := exclude(r.ExcludeResources, mr, out); err != nil {
			return nil, err
		}
		out.matchConstraints = mr
		return kinds, nil
	}
	d := shared.ResourceDescription
	if !shared.UserInfo.IsEmpty() {
		cond, err := userCondition(shared.UserInfo)
		if err != nil {
			return nil, wrap(err, "match")
		}
		addCondition(out, "match-user", cond)
	}
	if len(d.Annotations) > 0 {
		addCondition(out, "match-annotations", annotationsCondition(d.Annotations))
	}
	names := d.Names
	if d.Name != "" {
		names = append(names, d.Name)
	}
	if len(names) > 0 {
		if slices.ContainsFunc(names, wildcard.ContainsWildcard) {
			addCondition(out, "match-names", anyGlob(atom("object.metadata.name"), names))
		} else {
			for i := range mr.ResourceRules {
				mr.ResourceRules[i].ResourceNames = names
			}
		}
	}
	if d.Selector != nil {
		if hasWildcardSelector(d.Selector) {
			return nil, cannot("match selector with wildcards")
		}
		mr.ObjectSelector = d.Selector
	}
	if d.NamespaceSelector != nil {
		mr.NamespaceSelector = d.NamespaceSelector.DeepCopy()
	}
	if len(d.Namespaces) > 0 {
		if slices.ContainsFunc(d.Namespaces, wildcard.ContainsWildcard) {
			addCondition(out, "match-namespaces", anyGlob(atom("request.namespace"), d.Namespaces))
		} else {
			if mr.NamespaceSelector == nil {
				mr.NamespaceSelector = &metav1.LabelSelector{}
			}
			mr.NamespaceSelector.MatchExpressions = append(mr.NamespaceSelector.MatchExpressions, metav1.LabelSelectorRequirement{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: d.Namespaces,
			})
		}
	}
	if err := exclude(r.ExcludeResources, mr, out); err != nil {
		return nil, err
	}
	out.matchConstraints = mr
	return kinds, nil
}

func lastPart(kind string) string {
	parts := strings.Split(kind, "/")
	if len(parts) == 2 && parts[0] != "" && parts[0][0] >= 'A' && parts[0][0] <= 'Z' {
		return parts[0]
	}
	return parts[len(parts)-1]
}

func sameFilter(a, b kyvernov1.ResourceFilter) bool {
	ja, _ := jsonString(a)
	jb, _ := jsonString(b)
	return ja == jb
}

// mergeRule adds rule, folding it into an existing rule of the same group,
// version and operations.
func mergeRule(rules []admissionregistrationv1.NamedRuleWithOperations, rule admissionregistrationv1.NamedRuleWithOperations) []admissionregistrationv1.NamedRuleWithOperations {
	for i := range rules {
		r := &rules[i]
		if slices.Equal(r.APIGroups, rule.APIGroups) && slices.Equal(r.APIVersions, rule.APIVersions) && slices.Equal(r.Operations, rule.Operations) {
			if !slices.Contains(r.Resources, rule.Resources[0]) {
				r.Resources = append(r.Resources, rule.Resources[0])
			}
			return rules
		}
	}
	return append(rules, rule)
}

func hasWildcardSelector(s *metav1.LabelSelector) bool {
	for k, v := range s.MatchLabels {
		if wildcard.ContainsWildcard(k) || wildcard.ContainsWildcard(v) {
			return true
		}
	}
	return false
}

func anyGlob(v expr, patterns []string) expr {
	var plain []string
	var globs []expr
	for _, p := range patterns {
		if wildcard.ContainsWildcard(p) {
			globs = append(globs, globExpr(v, p))
		} else {
			plain = append(plain, p)
		}
	}
	var parts []expr
	switch len(plain) {
	case 0:
	case 1:
		parts = append(parts, rel(v, "==", str(plain[0])))
	default:
		parts = append(parts, rel(v, "in", strList(plain)))
	}
	return or(append(parts, globs...)...)
}

// userCondition converts subjects (users, groups, service accounts) into
// a test on request.userInfo; roles and clusterRoles are not visible to
// CEL.
func userCondition(u kyvernov1.UserInfo) (expr, error) {
	if len(u.Roles) > 0 || len(u.ClusterRoles) > 0 {
		return expr{}, cannot("roles and clusterRoles are not visible to CEL")
	}
	var parts []expr
	for _, s := range u.Subjects {
		switch s.Kind {
		case "User":
			parts = append(parts, anyGlob(atom("request.userInfo.username"), []string{s.Name}))
		case "Group":
			if wildcard.ContainsWildcard(s.Name) {
				parts = append(parts, macro(atom("request.userInfo.groups"), "exists", "group", globExpr(atom("group"), s.Name)))
			} else {
				parts = append(parts, rel(str(s.Name), "in", atom("request.userInfo.groups")))
			}
		case "ServiceAccount":
			parts = append(parts, anyGlob(atom("request.userInfo.username"), []string{"system:serviceaccount:" + s.Namespace + ":" + s.Name}))
		default:
			return expr{}, cannot("subject kind %q", s.Kind)
		}
	}
	return or(parts...), nil
}

// exclude converts exclude filters: kinds alone become
// excludeResourceRules; other filters a negated matchCondition.
func exclude(m *kyvernov1.MatchResources, mr *admissionregistrationv1.MatchResources, out *convertedRule) error {
	fs, all := filters(m)
	if len(fs) == 0 {
		return nil
	}
	var conds []expr
	for _, f := range fs {
		d := f.ResourceDescription
		if len(d.Kinds) > 0 && all {
			return cannot("exclude.all with kinds")
		}
		onlyKinds := f.UserInfo.IsEmpty() && len(d.Names) == 0 && d.Name == "" && len(d.Namespaces) == 0 && d.Selector == nil && d.NamespaceSelector == nil && len(d.Annotations) == 0 && len(d.Operations) == 0
		if len(d.Kinds) > 0 && onlyKinds {
			for _, k := range d.Kinds {
				rule, err := kindRule(k)
				if err != nil {
					return wrap(err, "exclude")
				}
				rule.Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
				mr.ExcludeResourceRules = mergeRule(mr.ExcludeResourceRules, rule)
			}
			continue
		}
		c, err := filterCondition(f)
		if err != nil {
			return wrap(err, "exclude")
		}
		if c.isTrue() {
			return cannot("empty exclude filter")
		}
		conds = append(conds, c)
	}
	if len(conds) == 0 {
		return nil
	}
	var excluded expr
	if all {
		excluded = and(conds...)
	} else {
		excluded = or(conds...)
	}
	addCondition(out, "exclude", not(excluded))
	return nil
}
