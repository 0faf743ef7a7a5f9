// Package config holds charter's install manifests (kustomize); its test
// renders them and reviews the RBAC they grant.
package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// cluster is the scope of a permission a ClusterRoleBinding grants.
const cluster = "*"

// grant is a reviewed permission: verbs on resources of group, cluster-wide
// (scope cluster) or in one namespace, and why the controller needs it. A
// resource written resource{name} is one object of it only (a rule's
// resourceNames).
type grant struct {
	scope, group, resources, verbs, why string
}

// reviewed lists every permission each controller's ServiceAccount may
// hold, as `kustomize build config/default` renders it (aggregated roles
// resolved against the ClusterRoles it ships). A change to a role that
// grants more fails TestEachControllerHoldsOnlyReviewedPermissions until
// it is reviewed here; one that grants less fails until it is removed, so
// the list stays what is granted.
var reviewed = map[string][]grant{
	"charter-admission": {
		{cluster, "kyverno.io", "clusterpolicies,policies,policyexceptions", "get,list,watch", "policy cache informers"},
		{cluster, "kyverno.io", "clusterpolicies/status,policies/status", "get,update,patch", "policy Ready status"},
		{cluster, "kyverno.io", "globalcontextentries", "get,list,watch", "GlobalContextEntry data and its reconciler"},
		{cluster, "kyverno.io", "globalcontextentries/status", "get,update,patch", "GlobalContextEntry Ready status"},
		{cluster, "policies.kyverno.io", "validatingpolicies,namespacedvalidatingpolicies,generatingpolicies,namespacedgeneratingpolicies,mutatingpolicies,namespacedmutatingpolicies,imagevalidatingpolicies,namespacedimagevalidatingpolicies", "get,list,watch", "policy cache informers"},
		{cluster, "policies.kyverno.io", "policyexceptions", "get,list,watch", "the shared policy cache watches CEL PolicyExceptions"},
		{cluster, "policies.kyverno.io", "validatingpolicies/status,namespacedvalidatingpolicies/status,generatingpolicies/status,namespacedgeneratingpolicies/status,mutatingpolicies/status,namespacedmutatingpolicies/status,imagevalidatingpolicies/status,namespacedimagevalidatingpolicies/status", "get,update,patch", "policy Ready status"},
		{cluster, "", "namespaces", "get,list,watch", "namespaceSelector, enforcement label"},
		{cluster, "", "configmaps", "get", "configMap context entries"},
		{cluster, "rbac.authorization.k8s.io", "rolebindings,clusterrolebindings", "get,list,watch", "roles/clusterRoles in match"},
		{cluster, "authorization.k8s.io", "subjectaccessreviews", "create", "the CEL authorizer of validate.cel rules"},
		{cluster, "admissionregistration.k8s.io", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "get,list,watch,create,update,patch,delete", "writes and cleans up its webhook configurations"},
		{cluster, "events.k8s.io", "events", "create,patch", "admission decision events"},
		{cluster, "wgpolicyk8s.io", "policyreports", "get,list", "promotion gate reads reports"},
		{cluster, "wgpolicyk8s.io", "policyreports,clusterpolicyreports", "get,create,update", "admission results into reports"},
		{cluster, "openreports.io", "reports", "get,list", "promotion gate reads reports (--reports-api=openreports)"},
		{cluster, "openreports.io", "reports,clusterreports", "get,create,update,delete", "admission results into OpenReports; delete: a copy follows its report away (--reports-api=both)"},
		{cluster, "kyverno.io", "updaterequests", "create,list,watch", "UpdateRequests of admitted requests, counted against the threshold"},
		{cluster, "kyverno.io", "updaterequests/status", "update", "a new UpdateRequest is Pending"},
		{"charter", "", "secrets", "get,list,watch,create,update,patch", "serving certificate and CA"},
		{"charter", "coordination.k8s.io", "leases", "get,list,watch,create,update,patch", "leader election"},
		{"charter", "", "events", "create,patch", "leader election event"},
		readWorkloads,
		{cluster, "", "serviceaccounts", "get", "a namespaced policy's ServiceAccount must exist (resource.Post)"},
		// admission/impersonate.yaml: resource.Post of a namespaced policy creates as its namespace's ServiceAccount.
		{cluster, "", "serviceaccounts{charter-policy}", "impersonate", "resource.Post of a namespaced policy at admission creates as charter-policy of its namespace, and as no other ServiceAccount"},
	},
	"charter-reports": {
		{cluster, "kyverno.io", "clusterpolicies,policies,policyexceptions", "get,list,watch", "background policies"},
		{cluster, "kyverno.io", "globalcontextentries", "list,watch", "GlobalContextEntry data (clusterstate)"},
		{cluster, "policies.kyverno.io", "validatingpolicies,namespacedvalidatingpolicies,generatingpolicies,namespacedgeneratingpolicies,mutatingpolicies,namespacedmutatingpolicies,imagevalidatingpolicies,namespacedimagevalidatingpolicies", "get,list,watch", "background policies"},
		{cluster, "policies.kyverno.io", "policyexceptions", "get,list,watch", "the shared policy cache watches CEL PolicyExceptions"},
		{cluster, "", "namespaces", "get,list,watch", "namespaceSelector"},
		{cluster, "", "configmaps", "get", "configMap context entries"},
		{cluster, "wgpolicyk8s.io", "policyreports,clusterpolicyreports", "get,list,create,update,delete", "one report per resource"},
		{cluster, "openreports.io", "reports,clusterreports", "get,list,create,update,delete", "one report per resource in OpenReports (--reports-api)"},
		{"charter", "coordination.k8s.io", "leases", "get,list,watch,create,update,patch", "leader election"},
		{"charter", "", "events", "create,patch", "leader election event"},
		readWorkloads,
		{cluster, "", "serviceaccounts", "get", "a namespaced policy's ServiceAccount must exist (resource.Post)"},
		// reports/impersonate.yaml: resource.Post of a namespaced policy in a scan creates as its namespace's ServiceAccount.
		{cluster, "", "serviceaccounts{charter-policy}", "impersonate", "resource.Post of a namespaced policy in a scan creates as charter-policy of its namespace, and as no other ServiceAccount"},
	},
	"charter-gitsync": {
		{cluster, "gitops.charter.dev", "policyrepositories", "get,list,watch,patch", "the watched object; receiver annotation"},
		{cluster, "gitops.charter.dev", "policyrepositories/status", "get,update,patch", "sync status"},
		{cluster, "", "secrets", "get", "a repository's credentials and keys"},
		{cluster, "", "namespaces", "get,list,watch,create,update,patch,delete", "platform repositories declare Namespaces"},
		{cluster, "apiextensions.k8s.io", "customresourcedefinitions", "get,list,watch,create,update,patch", "platform repositories may ship CRDs; never pruned"},
		{cluster, "kyverno.io", "clusterpolicies,policies,policyexceptions,cleanuppolicies,clustercleanuppolicies", "get,list,watch,create,update,patch,delete", "what platform repositories apply and prune"},
		{cluster, "policies.kyverno.io", "validatingpolicies,namespacedvalidatingpolicies,mutatingpolicies,namespacedmutatingpolicies,generatingpolicies,namespacedgeneratingpolicies,deletingpolicies,namespaceddeletingpolicies,imagevalidatingpolicies,namespacedimagevalidatingpolicies,policyexceptions", "get,list,watch,create,update,patch,delete", "the CEL policy kinds platform repositories apply and prune"},
		{cluster, "events.k8s.io", "events", "create,patch", "sync events"},
		{cluster, "authorization.k8s.io", "subjectaccessreviews", "create", "pre-apply check: may the background controller write a ClusterPolicy's targets"},
		{cluster, "kyverno.io", "globalcontextentries", "get", "pre-apply check: warn of a globalReference to an entry that is not Ready"},
		{cluster, "", "serviceaccounts", "impersonate", "tenant repositories apply as their ServiceAccount"},
		{cluster, "", "serviceaccounts", "get", "an OCI repository pulls with its ServiceAccount's imagePullSecrets"},
		{"charter", "coordination.k8s.io", "leases", "get,list,watch,create,update,patch", "leader election"},
		{"charter", "", "events", "create,patch", "leader election event"},
	},
	"charter-background": {
		{cluster, "kyverno.io", "clusterpolicies,policies,policyexceptions", "get,list,watch", "generate and mutate-existing rules"},
		{cluster, "kyverno.io", "globalcontextentries", "list,watch", "GlobalContextEntry data (clusterstate)"},
		{cluster, "policies.kyverno.io", "validatingpolicies,namespacedvalidatingpolicies,generatingpolicies,namespacedgeneratingpolicies,mutatingpolicies,namespacedmutatingpolicies,imagevalidatingpolicies,namespacedimagevalidatingpolicies", "get,list,watch", "the shared policy cache watches them"},
		{cluster, "policies.kyverno.io", "policyexceptions", "get,list,watch", "the shared policy cache watches CEL PolicyExceptions"},
		{cluster, "kyverno.io", "updaterequests", "get,list,watch,delete", "its work queue"},
		{cluster, "kyverno.io", "updaterequests/status", "get,update,patch", "UpdateRequest state"},
		{cluster, "kyverno.io", "clusterpolicies/status,policies/status", "get,update,patch", "Background condition naming a forbidden write"},
		{cluster, "policies.kyverno.io", "generatingpolicies/status,mutatingpolicies/status,namespacedgeneratingpolicies/status,namespacedmutatingpolicies/status", "get,update,patch", "Background condition of CEL policies"},
		{cluster, "wgpolicyk8s.io", "policyreports,clusterpolicyreports", "get,create,update", "GeneratingPolicy and MutatingPolicy results into their triggers' reports"},
		{cluster, "openreports.io", "reports,clusterreports", "get,create,update,delete", "the same into OpenReports; delete: a copy follows its report away (--reports-api=both)"},
		{cluster, "", "namespaces", "get,list,watch", "namespaceSelector, Namespace triggers"},
		{cluster, "", "configmaps", "get", "configMap context entries"},
		{cluster, "", "events", "create,patch", "events on policies"},
		{"charter", "coordination.k8s.io", "leases", "get,list,watch,create,update,patch", "leader election"},
		{cluster, "", "serviceaccounts", "get", "a namespaced policy's ServiceAccount must exist"},
		// background/impersonate.yaml: namespaced policies write as their namespace's ServiceAccount.
		{cluster, "", "serviceaccounts{charter-policy}", "impersonate", "namespaced policies write as charter-policy of their namespace, and as no other ServiceAccount"},
		// background/downstream.yaml, aggregated: what cluster-scoped policies generate and mutate (Kyverno's chart defaults).
		{cluster, "", "configmaps,resourcequotas,limitranges", "get,list,watch,create,update,patch,delete", "downstream objects, clone sources, targets"},
		{cluster, "networking.k8s.io", "networkpolicies,ingresses,ingressclasses", "get,list,watch,create,update,patch,delete", "downstream objects"},
		{cluster, "rbac.authorization.k8s.io", "roles,rolebindings", "get,list,watch,create,update,patch,delete", "downstream objects"},
		{cluster, "resource.k8s.io", "resourceclaims,resourceclaimtemplates", "get,list,watch,create,update,patch,delete", "downstream objects"},
	},
	"charter-cleanup": {
		{cluster, "kyverno.io", "cleanuppolicies,clustercleanuppolicies", "get,list,watch", "the cleanup policies"},
		{cluster, "kyverno.io", "cleanuppolicies/status,clustercleanuppolicies/status", "get,update,patch", "last run, Ready/Stalled"},
		{cluster, "policies.kyverno.io", "deletingpolicies,namespaceddeletingpolicies", "get,list,watch", "the deleting policies"},
		{cluster, "policies.kyverno.io", "deletingpolicies/status,namespaceddeletingpolicies/status", "get,update,patch", "last run, Ready/Stalled"},
		{cluster, "kyverno.io", "clusterpolicies,policies,policyexceptions", "get,list,watch", "the process's shared policy cache (clusterstate)"},
		{cluster, "kyverno.io", "globalcontextentries", "list,watch", "GlobalContextEntry data (clusterstate)"},
		{cluster, "policies.kyverno.io", "validatingpolicies,namespacedvalidatingpolicies,generatingpolicies,namespacedgeneratingpolicies,mutatingpolicies,namespacedmutatingpolicies,imagevalidatingpolicies,namespacedimagevalidatingpolicies", "get,list,watch", "the process's shared policy cache (clusterstate)"},
		{cluster, "policies.kyverno.io", "policyexceptions", "get,list,watch", "the shared policy cache watches CEL PolicyExceptions"},
		{cluster, "", "namespaces", "get,list,watch", "namespaceSelector"},
		{cluster, "apiextensions.k8s.io", "customresourcedefinitions", "get,list,watch", "TTL kinds rediscovered as CRDs come and go"},
		{cluster, "authorization.k8s.io", "selfsubjectaccessreviews", "create", "TTL kinds: may it list, watch and delete"},
		{cluster, "events.k8s.io", "events", "create,patch", "deletion, dry-run and invalid TTL events"},
		{cluster, "", "serviceaccounts", "get", "a namespaced policy's ServiceAccount must exist"},
		// cleanup/impersonate.yaml: namespaced policies list and delete as their namespace's ServiceAccount.
		{cluster, "", "serviceaccounts{charter-policy}", "impersonate", "namespaced policies delete as charter-policy of their namespace, and as no other ServiceAccount"},
		{"charter", "coordination.k8s.io", "leases", "get,list,watch,create,update,patch", "leader election"},
		{"charter", "", "events", "create,patch", "leader election event"},
	},
}

// readWorkloads stands for config/rbac/read/workloads.yaml, which admission
// and reports both aggregate: expanded by expandGrants.
var readWorkloads = grant{why: "read-workloads"}

var workloadReads = []grant{
	{cluster, "", "pods,services,configmaps,serviceaccounts,persistentvolumeclaims,replicationcontrollers,limitranges,resourcequotas", "get,list,watch", "scanned kinds"},
	{cluster, "apps", "deployments,daemonsets,statefulsets,replicasets", "get,list,watch", "scanned kinds"},
	{cluster, "batch", "jobs,cronjobs", "get,list,watch", "scanned kinds"},
	{cluster, "autoscaling", "horizontalpodautoscalers", "get,list,watch", "scanned kinds"},
	{cluster, "policy", "poddisruptionbudgets", "get,list,watch", "scanned kinds"},
	{cluster, "networking.k8s.io", "ingresses,networkpolicies", "get,list,watch", "scanned kinds"},
}

// rendered is what `kustomize build config/default` declares.
type rendered struct {
	serviceAccounts     []string // namespace/name
	clusterRoles        map[string]*rbacv1.ClusterRole
	roles               map[string]*rbacv1.Role // namespace/name
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
	roleBindings        []*rbacv1.RoleBinding
	deployments         []*appsv1.Deployment
}

func render(t *testing.T) *rendered {
	t.Helper()
	return collect(t, kustomizeBuild(t, "default"))
}

// kustomizeBuild is `kustomize build dir`, built once per test binary
// (the CRDs make it slow) and copied for each caller.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	built, err := kustomizeBuilds(dir)
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	out := make([]*unstructured.Unstructured, len(built))
	for i, u := range built {
		out[i] = u.DeepCopy()
	}
	return out
}

var kustomizeBuilds = func() func(dir string) ([]*unstructured.Unstructured, error) {
	var mu sync.Mutex
	cache := map[string][]*unstructured.Unstructured{}
	return func(dir string) ([]*unstructured.Unstructured, error) {
		mu.Lock()
		defer mu.Unlock()
		if objs, ok := cache[dir]; ok {
			return objs, nil
		}
		resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return nil, err
		}
		var objs []*unstructured.Unstructured
		for _, res := range resources.Resources() {
			b, err := res.MarshalJSON()
			if err != nil {
				return nil, err
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(b); err != nil {
				return nil, err
			}
			objs = append(objs, u)
		}
		cache[dir] = objs
		return objs, nil
	}
}()

// collect sorts what objs declare into rendered.
func collect(t *testing.T, objs []*unstructured.Unstructured) *rendered {
	t.Helper()
	out := &rendered{clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[string]*rbacv1.Role{}}
	for _, res := range objs {
		into := func(obj any) {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(res.Object, obj); err != nil {
				t.Fatalf("%s %s: %v", res.GetKind(), res.GetName(), err)
			}
		}
		switch res.GetKind() {
		case "ServiceAccount":
			out.serviceAccounts = append(out.serviceAccounts, res.GetNamespace()+"/"+res.GetName())
		case "ClusterRole":
			var r rbacv1.ClusterRole
			into(&r)
			out.clusterRoles[r.Name] = &r
		case "Role":
			var r rbacv1.Role
			into(&r)
			out.roles[r.Namespace+"/"+r.Name] = &r
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			into(&b)
			out.clusterRoleBindings = append(out.clusterRoleBindings, &b)
		case "RoleBinding":
			var b rbacv1.RoleBinding
			into(&b)
			out.roleBindings = append(out.roleBindings, &b)
		case "Deployment":
			var d appsv1.Deployment
			into(&d)
			out.deployments = append(out.deployments, &d)
		}
	}
	return out
}

// clusterRoleRules returns a ClusterRole's rules, those of the ClusterRoles
// its aggregationRule selects when it has one, as the API server's
// aggregation controller would fill them in.
func (r *rendered) clusterRoleRules(t *testing.T, name string) []rbacv1.PolicyRule {
	t.Helper()
	role, ok := r.clusterRoles[name]
	if !ok {
		t.Fatalf("ClusterRole %s is bound but not declared", name)
	}
	if role.AggregationRule == nil {
		return role.Rules
	}
	if len(role.Rules) > 0 {
		t.Errorf("aggregated ClusterRole %s declares rules of its own; the aggregation controller overwrites them", name)
	}
	var rules []rbacv1.PolicyRule
	names := slices.Sorted(maps.Keys(r.clusterRoles))
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatalf("ClusterRole %s: %v", name, err)
		}
		for _, n := range names {
			member := r.clusterRoles[n]
			if n != name && member.AggregationRule == nil && s.Matches(labels.Set(member.Labels)) {
				rules = append(rules, member.Rules...)
			}
		}
	}
	return rules
}

// permissions expands what account holds into "scope group/resource verb"
// strings, failing on wildcards and non-resource URLs.
func (r *rendered) permissions(t *testing.T, account string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	add := func(scope, via string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			if len(rule.NonResourceURLs) > 0 {
				t.Errorf("%s via %s: non-resource URLs %v", account, via, rule.NonResourceURLs)
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						if g == "*" || res == "*" || v == "*" || strings.Contains(res, "*") {
							t.Errorf("%s via %s: wildcard in %q %q %q", account, via, g, res, v)
						}
						if len(rule.ResourceNames) == 0 {
							out[permission(scope, g, res, v)] = true
						}
						// A rule limited to some objects grants those
						// only: reviewed as resource{name}.
						for _, name := range rule.ResourceNames {
							out[permission(scope, g, res+"{"+name+"}", v)] = true
						}
					}
				}
			}
		}
	}
	holds := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace+"/"+s.Name == account
		})
	}
	for _, b := range r.clusterRoleBindings {
		if holds(b.Subjects) {
			add(cluster, "ClusterRoleBinding "+b.Name, r.clusterRoleRules(t, b.RoleRef.Name))
		}
	}
	for _, b := range r.roleBindings {
		if !holds(b.Subjects) {
			continue
		}
		var rules []rbacv1.PolicyRule
		switch b.RoleRef.Kind {
		case "Role":
			role, ok := r.roles[b.Namespace+"/"+b.RoleRef.Name]
			if !ok {
				t.Fatalf("RoleBinding %s/%s: Role %s not declared", b.Namespace, b.Name, b.RoleRef.Name)
			}
			rules = role.Rules
		default:
			rules = r.clusterRoleRules(t, b.RoleRef.Name)
		}
		add(b.Namespace, "RoleBinding "+b.Namespace+"/"+b.Name, rules)
	}
	return out
}

func permission(scope, group, resource, verb string) string {
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s/%s %s", scope, group, resource, verb)
}

// expandGrants expands grants into permission strings; the scope
// "charter" stands for namespace, where charter runs.
func expandGrants(grants []grant, namespace string) map[string]string {
	out := map[string]string{}
	for _, g := range grants {
		if g == readWorkloads {
			for k, v := range expandGrants(workloadReads, namespace) {
				out[k] = v
			}
			continue
		}
		scope := g.scope
		if scope == "charter" {
			scope = namespace
		}
		for _, res := range strings.Split(g.resources, ",") {
			for _, v := range strings.Split(g.verbs, ",") {
				out[permission(scope, g.group, res, v)] = g.why
			}
		}
	}
	return out
}

func TestEachControllerHoldsOnlyReviewedPermissions(t *testing.T) {
	checkReviewed(t, render(t), "charter", reviewed)
}

// checkReviewed fails unless r declares one ServiceAccount per entry of
// want, in namespace, each holding exactly the permissions want reviews
// for it.
func checkReviewed(t *testing.T, r *rendered, namespace string, want map[string][]grant) {
	t.Helper()
	var accounts []string
	for name := range want {
		accounts = append(accounts, namespace+"/"+name)
	}
	sort.Strings(accounts)
	got := slices.Clone(r.serviceAccounts)
	sort.Strings(got)
	if !slices.Equal(got, accounts) {
		t.Fatalf("ServiceAccounts: got %v, want one per controller %v", got, accounts)
	}
	for _, account := range accounts {
		t.Run(account, func(t *testing.T) {
			held := r.permissions(t, account)
			want := expandGrants(want[strings.TrimPrefix(account, namespace+"/")], namespace)
			var extra, missing []string
			for p := range held {
				if _, ok := want[p]; !ok {
					extra = append(extra, p)
				}
			}
			for p := range want {
				if !held[p] {
					missing = append(missing, p)
				}
			}
			sort.Strings(extra)
			sort.Strings(missing)
			if len(extra) > 0 {
				t.Errorf("granted but not reviewed (add to reviewed, with why, or take it away):\n  %s", strings.Join(extra, "\n  "))
			}
			if len(missing) > 0 {
				t.Errorf("reviewed but no longer granted (remove from reviewed):\n  %s", strings.Join(missing, "\n  "))
			}
		})
	}
}

// TestEachDeploymentRunsItsControllerAsItsOwnServiceAccount: a Deployment
// runs exactly the controllers its ServiceAccount is named for.
func TestEachDeploymentRunsItsControllerAsItsOwnServiceAccount(t *testing.T) {
	r := render(t)
	if len(r.deployments) == 0 {
		t.Fatal("config/default renders no Deployments")
	}
	for _, d := range r.deployments {
		sa := d.Spec.Template.Spec.ServiceAccountName
		var controllers string
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, a := range c.Args {
				if v, ok := strings.CutPrefix(a, "--controllers="); ok {
					controllers = v
				}
			}
		}
		if controllers == "" || strings.Contains(controllers, ",") {
			t.Errorf("Deployment %s runs --controllers=%q: want exactly one controller", d.Name, controllers)
			continue
		}
		if want := "charter-" + controllers; sa != want {
			t.Errorf("Deployment %s runs %s as ServiceAccount %q, want %q", d.Name, controllers, sa, want)
		}
		if d.Spec.Template.Spec.AutomountServiceAccountToken != nil && !*d.Spec.Template.Spec.AutomountServiceAccountToken {
			t.Errorf("Deployment %s does not mount its ServiceAccount token", d.Name)
		}
	}
}

// TestAggregatedRolesTakeKyvernosLabels: a ClusterRole written to widen
// one of Kyverno's controllers (rbac.kyverno.io/aggregate-to-<controller>,
// as Kyverno's chart and its e2e tests' permissions.yaml label them)
// widens charter's matching controller too, beside charter's own label.
func TestAggregatedRolesTakeKyvernosLabels(t *testing.T) {
	r := render(t)
	for role, wanted := range map[string][]string{
		"charter-cleanup-aggregate":    {"rbac.charter.dev/aggregate-to-cleanup", "rbac.kyverno.io/aggregate-to-cleanup-controller"},
		"charter-background-aggregate": {"rbac.charter.dev/aggregate-to-background", "rbac.kyverno.io/aggregate-to-background-controller"},
		"charter-reports-view":         {"rbac.charter.dev/aggregate-to-reports", "rbac.kyverno.io/aggregate-to-reports-controller"},
		"charter-admission-view":       {"rbac.charter.dev/aggregate-to-admission", "rbac.kyverno.io/aggregate-to-admission-controller"},
	} {
		cr, ok := r.clusterRoles[role]
		if !ok || cr.AggregationRule == nil {
			t.Errorf("ClusterRole %s missing or not aggregated", role)
			continue
		}
		for _, label := range wanted {
			member := labels.Set{label: "true"}
			selected := false
			for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
				s, err := metav1.LabelSelectorAsSelector(&sel)
				if err != nil {
					t.Fatalf("ClusterRole %s: %v", role, err)
				}
				if s.Matches(member) {
					selected = true
				}
			}
			if !selected {
				t.Errorf("ClusterRole %s does not aggregate ClusterRoles labelled %s", role, label)
			}
		}
	}
}
