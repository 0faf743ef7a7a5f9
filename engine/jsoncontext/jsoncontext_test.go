package jsoncontext

import (
	"reflect"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/charter-dev/charter/engine/jmespath"
)

func TestParseImage(t *testing.T) {
	tests := []struct {
		in   string
		want ImageInfo
		ref  string
	}{
		{"nginx", ImageInfo{Registry: "docker.io", Path: "nginx", Name: "nginx", Tag: "latest"}, "docker.io/nginx:latest"},
		{"library/nginx:1.25", ImageInfo{Registry: "docker.io", Path: "library/nginx", Name: "nginx", Tag: "1.25"}, "docker.io/library/nginx:1.25"},
		{"ghcr.io/org/app@sha256:abc", ImageInfo{Registry: "ghcr.io", Path: "org/app", Name: "app", Digest: "sha256:abc"}, "ghcr.io/org/app@sha256:abc"},
		{"localhost:5000/app:v1", ImageInfo{Registry: "localhost:5000", Path: "app", Name: "app", Tag: "v1"}, "localhost:5000/app:v1"},
		{"localhost/app", ImageInfo{Registry: "localhost", Path: "app", Name: "app", Tag: "latest"}, "localhost/app:latest"},
	}
	for _, tt := range tests {
		got, ok := ParseImage(tt.in)
		if !ok || got != tt.want {
			t.Errorf("ParseImage(%q) = %+v, %v; want %+v", tt.in, got, ok, tt.want)
		}
		if got.Reference() != tt.ref {
			t.Errorf("ParseImage(%q).Reference() = %q, want %q", tt.in, got.Reference(), tt.ref)
		}
	}
	for _, bad := range []string{"", "app:", "app@"} {
		if _, ok := ParseImage(bad); ok {
			t.Errorf("ParseImage(%q) should fail", bad)
		}
	}
}

func TestImagesOfControllers(t *testing.T) {
	containers := []any{map[string]any{"name": "app", "image": "nginx:1"}}
	pod := map[string]any{"kind": "Pod", "spec": map[string]any{"containers": containers}}
	deploy := map[string]any{"kind": "Deployment", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{"initContainers": containers}}}}
	cron := map[string]any{"kind": "CronJob", "spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": containers}}}}}}
	for name, tc := range map[string]struct {
		obj  map[string]any
		list string
	}{"pod": {pod, "containers"}, "deployment": {deploy, "initContainers"}, "cronjob": {cron, "containers"}} {
		images := Images(tc.obj)
		got, _ := images[tc.list].(map[string]any)["app"].(map[string]any)
		if got["tag"] != "1" || got["registry"] != "docker.io" {
			t.Errorf("%s: images = %v", name, images)
		}
	}
	if Images(map[string]any{"kind": "ConfigMap"}) != nil {
		t.Error("a ConfigMap has no images")
	}
}

func TestRequestDocument(t *testing.T) {
	old := map[string]any{"kind": "ConfigMap"}
	root := RequestDocument(RequestInfo{
		Operation: "DELETE", OldObject: old,
		UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:ci:deployer", Groups: []string{"g"}},
		Roles:    []string{"ns:r"},
	})
	req := root["request"].(map[string]any)
	if !reflect.DeepEqual(req["object"], old) {
		t.Errorf("on DELETE request.object must be the old object, got %v", req["object"])
	}
	if root["serviceAccountName"] != "deployer" || root["serviceAccountNamespace"] != "ci" {
		t.Errorf("service account = %v/%v", root["serviceAccountNamespace"], root["serviceAccountName"])
	}
	if !reflect.DeepEqual(req["roles"], []any{"ns:r"}) {
		t.Errorf("roles = %v", req["roles"])
	}
}

func TestDocumentLayering(t *testing.T) {
	parent := New(nil, map[string]any{"request": map[string]any{"operation": "CREATE"}})
	child := parent.Child()
	child.Set("request.operation", "UPDATE")
	child.Set("a.b", 1)
	if v, _ := parent.Get("request.operation"); v != "CREATE" {
		t.Errorf("parent changed: %v", v)
	}
	if v, _ := child.Get("request.operation"); v != "UPDATE" {
		t.Errorf("child = %v", v)
	}
	if v, ok := child.Get("a.b"); !ok || v != 1 {
		t.Errorf("a.b = %v", v)
	}
	if _, ok := parent.Get("a"); ok {
		t.Error("parent sees child's entry")
	}
}

func TestSplitPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"request.operation", []string{"request", "operation"}},
		{"element", []string{"element"}},
		{`request.object.metadata.annotations."example.com/team"`, []string{"request", "object", "metadata", "annotations", "example.com/team"}},
		{`"a.b".c`, []string{"a.b", "c"}},
		{`a."b\"c.d"`, []string{"a", `b"c.d`}},
		{`a."".b`, []string{"a", "", "b"}},
	} {
		got := SplitPath(tc.path)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("SplitPath(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// TestDocumentQuotedKey: a quoted segment sets and gets one key, dots and
// all, and JMESPath finds it under the same quoting.
func TestDocumentQuotedKey(t *testing.T) {
	d := New(jmespath.New(), map[string]any{"request": map[string]any{"object": map[string]any{}}})
	d.Set(`request.object.metadata.annotations."example.com/team"`, "payments")
	if v, ok := d.Get(`request.object.metadata.annotations."example.com/team"`); !ok || v != "payments" {
		t.Fatalf("Get = %v, %v", v, ok)
	}
	v, err := d.Query(`request.object.metadata.annotations."example.com/team"`)
	if err != nil || v != "payments" {
		t.Fatalf("Query = %v, %v", v, err)
	}
	if _, ok := d.Get("request.object.metadata.annotations.example"); ok {
		t.Fatal("the quoted key was split at its dots")
	}
}
