package match

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/wildcard"
)

func pod(name, ns string) *Resource {
	return &Resource{
		Kind:      schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Name:      name,
		Namespace: ns,
		Operation: kyvernov1.Create,
	}
}

func TestMatchesAndExcludes(t *testing.T) {
	deploy := &Resource{Kind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Name: "web", Namespace: "prod"}
	labelled := pod("web-1", "prod")
	labelled.Labels = map[string]string{"app": "web", "tier": "front"}
	labelled.Annotations = map[string]string{"team.example.com/owner": "alice"}
	labelled.NamespaceLabels = func() map[string]string { return map[string]string{"env": "prod"} }
	exec := pod("web-1", "prod")
	exec.SubResource = "exec"
	exec.Operation = kyvernov1.Connect
	debug := pod("web-1", "prod")
	debug.SubResource = "ephemeralcontainers"
	debug.Operation = kyvernov1.Update
	user := pod("web-1", "prod")
	user.UserInfo = authenticationv1.UserInfo{Username: "system:serviceaccount:ci:deployer", Groups: []string{"devs"}}
	user.ClusterRoles = []string{"edit"}
	user.Roles = []string{"prod:admin"}
	nsObj := &Resource{Kind: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "prod"}

	tests := []struct {
		name  string
		block string
		res   *Resource
		want  bool
	}{
		{"plain kind", `{resources: {kinds: [Pod]}}`, pod("a", "ns"), true},
		{"other kind", `{resources: {kinds: [Deployment]}}`, pod("a", "ns"), false},
		{"version/kind", `{resources: {kinds: [v1/Pod]}}`, pod("a", "ns"), true},
		{"wrong version", `{resources: {kinds: [v2/Pod]}}`, pod("a", "ns"), false},
		{"group/version/kind", `{resources: {kinds: [apps/v1/Deployment]}}`, deploy, true},
		{"wildcard version", `{resources: {kinds: ["*/Pod"]}}`, pod("a", "ns"), true},
		{"star", `{resources: {kinds: ["*"]}}`, deploy, true},
		{"kind does not match subresource", `{resources: {kinds: [Pod]}}`, exec, false},
		{"kind/subresource", `{resources: {kinds: [Pod/exec]}}`, exec, true},
		{"kind.subresource", `{resources: {kinds: [Pod.exec]}}`, exec, true},
		{"a Pod rule sees ephemeral containers added by kubectl debug", `{resources: {kinds: [Pod]}}`, debug, true},
		{"v1/Pod sees them too", `{resources: {kinds: [v1/Pod]}}`, debug, true},
		{"a Pod/exec rule does not", `{resources: {kinds: [Pod/exec]}}`, debug, false},
		{"Pod/ephemeralcontainers names it", `{resources: {kinds: [Pod/ephemeralcontainers]}}`, debug, true},
		{"subresource selector on the resource", `{resources: {kinds: [Pod/exec]}}`, pod("a", "ns"), false},
		{"name wildcard", `{resources: {kinds: [Pod], name: "web-*"}}`, labelled, true},
		{"names", `{resources: {kinds: [Pod], names: [db, "web-?"]}}`, labelled, true},
		{"names miss", `{resources: {kinds: [Pod], names: [db]}}`, labelled, false},
		{"namespaces wildcard", `{resources: {kinds: [Pod], namespaces: ["pr*"]}}`, labelled, true},
		{"namespaces miss", `{resources: {kinds: [Pod], namespaces: [dev]}}`, labelled, false},
		{"namespace object by its name", `{resources: {kinds: [Namespace], namespaces: [prod]}}`, nsObj, true},
		{"annotations", `{resources: {kinds: [Pod], annotations: {"team.example.com/*": "a*"}}}`, labelled, true},
		{"annotations miss", `{resources: {kinds: [Pod], annotations: {owner: alice}}}`, labelled, false},
		{"selector", `{resources: {kinds: [Pod], selector: {matchLabels: {app: web}}}}`, labelled, true},
		{"selector wildcard value", `{resources: {kinds: [Pod], selector: {matchLabels: {app: "w*"}}}}`, labelled, true},
		{"selector expression", `{resources: {kinds: [Pod], selector: {matchExpressions: [{key: tier, operator: NotIn, values: [front]}]}}}`, labelled, false},
		{"namespaceSelector", `{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: prod}}}}`, labelled, true},
		{"namespaceSelector miss", `{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: dev}}}}`, labelled, false},
		{"namespaceSelector without labels", `{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: prod}}}}`, pod("a", "ns"), false},
		{"operations", `{resources: {kinds: [Pod], operations: [CREATE]}}`, pod("a", "ns"), true},
		{"operations miss", `{resources: {kinds: [Pod], operations: [UPDATE, DELETE]}}`, pod("a", "ns"), false},
		{"any: one filter matches", `{any: [{resources: {kinds: [Deployment]}}, {resources: {kinds: [Pod]}}]}`, pod("a", "ns"), true},
		{"all: every filter must match", `{all: [{resources: {kinds: [Pod]}}, {resources: {namespaces: [other]}}]}`, pod("a", "ns"), false},
		{"all: both match", `{all: [{resources: {kinds: [Pod]}}, {resources: {namespaces: [ns]}}]}`, pod("a", "ns"), true},
		{"clusterRoles", `{resources: {kinds: [Pod]}, clusterRoles: [edit]}`, user, true},
		{"clusterRoles miss", `{resources: {kinds: [Pod]}, clusterRoles: [admin]}`, user, false},
		{"roles", `{any: [{roles: ["prod:admin"]}]}`, user, true},
		{"subject service account", `{any: [{subjects: [{kind: ServiceAccount, name: deployer, namespace: ci}]}]}`, user, true},
		{"subject group", `{any: [{subjects: [{kind: Group, name: devs}]}]}`, user, true},
		{"subject user miss", `{any: [{subjects: [{kind: User, name: bob}]}]}`, user, false},
		{"empty block", `{}`, pod("a", "ns"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m kyvernov1.MatchResources
			if err := yaml.UnmarshalStrict([]byte(tt.block), &m); err != nil {
				t.Fatalf("bad block: %v", err)
			}
			if got := Matches(&m, tt.res); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
			// An exclude block removes exactly what a match block selects.
			if got := Excludes(&m, tt.res); got != tt.want {
				t.Errorf("Excludes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectsHonoursExclude(t *testing.T) {
	var match, exclude kyvernov1.MatchResources
	_ = yaml.Unmarshal([]byte(`{any: [{resources: {kinds: [Pod]}}]}`), &match)
	_ = yaml.Unmarshal([]byte(`{any: [{resources: {namespaces: [kube-system]}}]}`), &exclude)
	if !Selects(&match, &exclude, pod("a", "default")) {
		t.Error("pod in default should be selected")
	}
	if Selects(&match, &exclude, pod("a", "kube-system")) {
		t.Error("pod in kube-system should be excluded")
	}
	if !Selects(&match, nil, pod("a", "kube-system")) {
		t.Error("nil exclude must exclude nothing")
	}
}

func TestParseKind(t *testing.T) {
	tests := map[string]KindSelector{
		"Pod":                      {"*", "*", "Pod", ""},
		"v1/Pod":                   {"*", "v1", "Pod", ""},
		"*/Pod":                    {"*", "*", "Pod", ""},
		"Pod/exec":                 {"*", "*", "Pod", "exec"},
		"apps/v1/Deployment":       {"apps", "v1", "Deployment", ""},
		"v1/Pod/status":            {"*", "v1", "Pod", "status"},
		"apps/v1/Deployment/*":     {"apps", "v1", "Deployment", "*"},
		"Deployment.scale":         {"*", "*", "Deployment", "scale"},
		"":                         {"*", "*", "", ""},
		"v1/Pod/status/x":          {"v1", "Pod", "status", "x"},
		"apps/v1/Deployment/a/b":   {"apps", "v1", "Deployment", "a/b"},
		"apps/v1/Deployment.scale": {"apps", "v1", "Deployment", "scale"},
	}
	for in, want := range tests {
		if got := ParseKind(in); got != want {
			t.Errorf("ParseKind(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// TestParseKindAllocatesNothing: Kinds parses a selector with a group,
// version or subresource on every request it meets, and no memo of the
// parses is kept for the process, so the parse must stay free of garbage.
func TestParseKindAllocatesNothing(t *testing.T) {
	for _, s := range []string{"Pod", "v1/Pod", "apps/v1/Deployment", "apps/v1/Deployment/scale/x", "Deployment.scale"} {
		if n := testing.AllocsPerRun(100, func() { _ = ParseKind(s) }); n != 0 {
			t.Errorf("ParseKind(%q) allocates %v times per call", s, n)
		}
	}
}

func BenchmarkKinds(b *testing.B) {
	selectors := []string{"Pod", "apps/v1/Deployment", "batch/v1/CronJob", "v1/Pod/status", "Pod.ephemeralcontainers", "networking.k8s.io/v1/Ingress"}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	b.ReportAllocs()
	for b.Loop() {
		_ = Kinds(selectors, gvk, "status")
	}
}

// TestKindsAgreesWithParseKind checks Kinds, which matches bare kinds
// without parsing them, against the selectors ParseKind reads, over
// selectors of every shape and requests with and without subresources.
func TestKindsAgreesWithParseKind(t *testing.T) {
	selectors := []string{"Pod", "Po*", "P?d", "Deployment", "*", "v1/Pod", "apps/v1/Deployment", "Pod/status", "apps/v1/Pod", "batch/v1/CronJob", "v1/Po?",
		"Pod.ephemeralcontainers", "*/Pod", "Pod/*", "networking.k8s.io/v1/Ingress", "", "Namespace"}
	gvks := []schema.GroupVersionKind{
		{Version: "v1", Kind: "Pod"}, {Group: "apps", Version: "v1", Kind: "Deployment"}, {Version: "v2", Kind: "Pod"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, {Version: "v1", Kind: "Namespace"}, {},
		{Group: "apps", Version: "v1", Kind: "Pod"}, {Group: "batch", Version: "v1", Kind: "CronJob"}, {Version: "v1", Kind: "status"},
	}
	// reference is Kinds for one selector, always through ParseKind.
	reference := func(s string, gvk schema.GroupVersionKind, sub string) bool {
		if s == "*" {
			return true
		}
		k := ParseKind(s)
		if !wildcard.Match(k.Group, gvk.Group) || !wildcard.Match(k.Version, gvk.Version) || !wildcard.Match(k.Kind, gvk.Kind) {
			return false
		}
		return wildcard.Match(k.SubResource, sub) ||
			(k.SubResource == "" && sub == "ephemeralcontainers" && gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Pod")
	}
	for _, s := range selectors {
		for _, gvk := range gvks {
			for _, sub := range []string{"", "status", "ephemeralcontainers"} {
				if got, want := Kinds([]string{s}, gvk, sub), reference(s, gvk, sub); got != want {
					t.Errorf("Kinds(%q, %s, %q) = %v, want %v", s, gvk, sub, got, want)
				}
			}
		}
	}
}
