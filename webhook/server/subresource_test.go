package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/charter-dev/charter/clusterstate/policycache"
)

// subresourceReview is an AdmissionReview for a request on a resource or
// one of its subresources.
type subresourceReview struct {
	kind        schema.GroupVersionKind     // request.kind: the object sent
	resource    schema.GroupVersionResource // request.resource: the parent resource
	subResource string
	operation   string
	namespace   string
	name        string
	object      map[string]any
	user        authenticationv1.UserInfo
}

func (s subresourceReview) body() []byte {
	user := s.user
	if user.Username == "" {
		user.Username = "alice"
	}
	req := map[string]any{
		"uid":         "uid-" + s.name,
		"kind":        map[string]any{"group": s.kind.Group, "version": s.kind.Version, "kind": s.kind.Kind},
		"resource":    map[string]any{"group": s.resource.Group, "version": s.resource.Version, "resource": s.resource.Resource},
		"subResource": s.subResource,
		"name":        s.name,
		"namespace":   s.namespace,
		"operation":   s.operation,
		"userInfo":    user,
		"object":      s.object,
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	return body
}

func snapshotOf(t *testing.T, file string) *policycache.Snapshot {
	t.Helper()
	s, err := policycache.Build(loadPolicies(t, file), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Errors) > 0 {
		t.Fatalf("%s does not compile: %v", file, s.Errors)
	}
	return s
}

// widgets is a KindResolver that knows one custom resource besides the
// built-in ones, as the manager's RESTMapper would after discovery.
type widgets struct{}

func (widgets) KindFor(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	if gvr == (schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}) {
		return schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, nil
	}
	return builtinKinds{}.KindFor(gvr)
}

func TestSubresourceRequestsMatchTheirParentKind(t *testing.T) {
	var (
		podGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
		podGVK        = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
		deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		scaleGVK      = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
		widgetGVR     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	)
	execOptions := map[string]any{"apiVersion": "v1", "kind": "PodExecOptions", "command": []any{"sh"}, "container": "c", "stdin": true, "tty": true}
	scale := func(replicas int) map[string]any {
		return map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale",
			"metadata": map[string]any{"name": "web", "namespace": "default"}, "spec": map[string]any{"replicas": replicas}}
	}
	unlabelledPod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx:1.27"}}}}

	tests := []struct {
		name        string
		kinds       KindResolver
		review      subresourceReview
		wantAllowed bool
		wantMessage []string
	}{
		{
			name: "exec: the PodExecOptions of a CONNECT is matched as Pod/exec",
			review: subresourceReview{kind: schema.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"}, resource: podGVR,
				subResource: "exec", operation: "CONNECT", namespace: "default", name: "web", object: execOptions},
			wantMessage: []string{"resource Pod/default/web was blocked", "deny-exec:", "exec into default/web is not allowed"},
		},
		{
			name: "attach: no rule names Pod/attach",
			review: subresourceReview{kind: schema.GroupVersionKind{Version: "v1", Kind: "PodAttachOptions"}, resource: podGVR,
				subResource: "attach", operation: "CONNECT", namespace: "default", name: "web",
				object: map[string]any{"apiVersion": "v1", "kind": "PodAttachOptions", "stdin": true}},
			wantAllowed: true,
		},
		{
			name: "scale: the Scale object is matched as Deployment/scale and validated",
			review: subresourceReview{kind: scaleGVK, resource: deploymentGVR, subResource: "scale", operation: "UPDATE",
				namespace: "default", name: "web", object: scale(5)},
			wantMessage: []string{"limit-scale:", "max-replicas", "at most 3 replicas"},
		},
		{
			name: "scale within the limit",
			review: subresourceReview{kind: scaleGVK, resource: deploymentGVR, subResource: "scale", operation: "UPDATE",
				namespace: "default", name: "web", object: scale(2)},
			wantAllowed: true,
		},
		{
			name: "status: a rule for kind Pod does not see the status subresource",
			review: subresourceReview{kind: podGVK, resource: podGVR, subResource: "status", operation: "UPDATE",
				namespace: "default", name: "web", object: unlabelledPod},
			wantAllowed: true,
		},
		{
			name: "the Pod itself is still checked",
			review: subresourceReview{kind: podGVK, resource: podGVR, operation: "CREATE",
				namespace: "default", name: "web", object: unlabelledPod},
			wantMessage: []string{"require-labels:", "label ''app.kubernetes.io/name'' is required"},
		},
		{
			name:  "a custom resource's scale through the KindResolver",
			kinds: widgets{},
			review: subresourceReview{kind: scaleGVK, resource: widgetGVR, subResource: "scale", operation: "UPDATE",
				namespace: "default", name: "w", object: scale(2)},
			wantMessage: []string{"limit-widget-scale:", "at most 1 widget"},
		},
		{
			name: "an unknown parent resource is denied with what could not be resolved",
			review: subresourceReview{kind: scaleGVK, resource: widgetGVR, subResource: "scale", operation: "UPDATE",
				namespace: "default", name: "w", object: scale(2)},
			wantMessage: []string{"resolving the kind of example.com/v1, Resource=widgets (subresource scale)", "unknown resource widgets.example.com"},
		},
	}
	snapshot := snapshotOf(t, "testdata/subresource-policies.yaml")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHandler(Options{Policies: staticSnapshots{snapshot}, Kinds: tc.kinds})
			resp := decision(t, h, PathValidate, tc.review.body())
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			for _, want := range tc.wantMessage {
				if resp.Result == nil || !strings.Contains(resp.Result.Message, want) {
					t.Errorf("message %q does not contain %q", message(resp.Result), want)
				}
			}
		})
	}
}

// fakeRoles answers from a table and counts its calls.
type fakeRoles struct {
	byUser map[string][2][]string
	err    error
	calls  atomic.Int32
}

func (f *fakeRoles) Roles(_ context.Context, u authenticationv1.UserInfo) ([]string, []string, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, nil, f.err
	}
	r := f.byUser[u.Username]
	return r[0], r[1], nil
}

func TestRolesAndClusterRolesAtAdmission(t *testing.T) {
	configMap := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings", "namespace": "shared"}}
	review := func(user string) []byte {
		return subresourceReview{kind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, operation: "CREATE",
			namespace: "shared", name: "settings", object: configMap, user: authenticationv1.UserInfo{Username: user}}.body()
	}
	roles := &fakeRoles{byUser: map[string][2][]string{
		"olivia": {nil, {"view", "cluster-operator"}},
		"eddie":  {{"shared:editor"}, nil},
		"victor": {{"other:editor"}, {"view"}},
	}}
	tests := []struct {
		user        string
		wantAllowed bool
	}{
		{"olivia", true}, // clusterRole cluster-operator excludes her
		{"eddie", true},  // role shared:editor excludes him
		{"victor", false},
		{"nobody", false},
	}
	h := NewHandler(Options{Policies: staticSnapshots{snapshotOf(t, "testdata/roles-policies.yaml")}, Roles: roles})
	for _, tc := range tests {
		t.Run(tc.user, func(t *testing.T) {
			resp := decision(t, h, PathValidateFail, review(tc.user))
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", resp.Allowed, tc.wantAllowed, message(resp.Result))
			}
			if !tc.wantAllowed && !strings.Contains(resp.Result.Message, "only operators and shared:editor may change ConfigMaps in shared") {
				t.Errorf("message %q", resp.Result.Message)
			}
		})
	}

	t.Run("a lookup failure denies, naming the user", func(t *testing.T) {
		failing := &fakeRoles{err: errors.New("rolebindings informer not synced")}
		h := NewHandler(Options{Policies: staticSnapshots{snapshotOf(t, "testdata/roles-policies.yaml")}, Roles: failing})
		resp := decision(t, h, PathValidateFail, review("olivia"))
		if resp.Allowed {
			t.Fatal("admitted although the roles could not be read")
		}
		if want := `resolving the roles of user "olivia": rolebindings informer not synced`; resp.Result.Message != want {
			t.Errorf("message %q, want %q", resp.Result.Message, want)
		}
	})

	t.Run("no lookup when no policy uses roles", func(t *testing.T) {
		counting := &fakeRoles{}
		h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}, Roles: counting})
		for _, path := range []string{PathValidate, PathMutate} {
			decision(t, h, path, compliant().review())
		}
		if n := counting.calls.Load(); n != 0 {
			t.Errorf("roles resolved %d times for policies that do not use them", n)
		}
	})
}

// TestSnapshotReadsRoles checks the snapshot's compile-time verdict the
// handlers ask before resolving roles.
func TestSnapshotReadsRoles(t *testing.T) {
	for file, want := range map[string]bool{
		"testdata/roles-policies.yaml":       true,
		"testdata/subresource-policies.yaml": false,
		"testdata/policies.yaml":             false,
	} {
		if got := snapshotOf(t, file).ReadsRoles(); got != want {
			t.Errorf("%s: ReadsRoles() = %v, want %v", file, got, want)
		}
	}
}

func message(s interface{ String() string }) string {
	if s == nil {
		return ""
	}
	return s.String()
}
