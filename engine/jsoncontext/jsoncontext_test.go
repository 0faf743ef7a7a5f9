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

// TestResetChild: a child reset after Set and SetRoot is what Child gives
// again (the foreach element loop), and the parent never sees the writes;
// the lazy entry follows the parent's state.
func TestResetChild(t *testing.T) {
	jp := jmespath.New()
	parent := New(jp, map[string]any{"request": map[string]any{"operation": "CREATE"}})
	parent.Lazy("images", func() any { return map[string]any{"n": 1.0} })
	child := parent.Child()
	child.SetRoot("element", "first")
	child.Set("request.operation", "UPDATE")
	child.Set("ctx.value", 2)
	if v, _ := child.Query("images.n"); v != 1.0 {
		t.Fatalf("child reads images.n %v", v)
	}
	child.Reset(parent)
	want := parent.Child()
	if !reflect.DeepEqual(child.root, want.root) || child.filled != want.filled || child.lazy != want.lazy {
		t.Errorf("reset child root %v filled %v, want %v filled %v", child.root, child.filled, want.root, want.filled)
	}
	for _, path := range []string{"element", "ctx"} {
		if _, ok := child.Get(path); ok {
			t.Errorf("%s is still set after Reset", path)
		}
	}
	if v, _ := child.Get("request.operation"); v != "CREATE" {
		t.Errorf("request.operation = %v after Reset", v)
	}
	if v, _ := parent.Get("request.operation"); v != "CREATE" {
		t.Errorf("parent changed: %v", v)
	}
	if v, _ := child.Query("images.n"); v != 1.0 {
		t.Errorf("after Reset the child reads images.n %v", v)
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

// searchOnly is a Querier that cannot tell what an expression reads.
type searchOnly struct{ q Querier }

func (s searchOnly) Search(expr string, data any) (any, error) { return s.q.Search(expr, data) }

// TestRequestImagesAreLazy: a request document works its images out only
// for a read that may see them, once for every document layered on it,
// and answers exactly as the document with images built up front.
func TestRequestImagesAreLazy(t *testing.T) {
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "ghcr.io/org/app:1.2"}}}}
	info := RequestInfo{Operation: "CREATE", Object: pod, Name: "web"}
	jp := jmespath.New()
	eager := New(jp, RequestDocument(info))
	lazy := func(q Querier) *Document { return NewRequest(q, info) }
	computed := func(d *Document) bool { _, ok := d.root["images"]; return ok }

	tests := []struct {
		name  string
		read  func(d *Document) (any, error)
		needs bool
	}{
		{"a query of another entry", func(d *Document) (any, error) { return d.Query("request.object.metadata.name") }, false},
		{"@ inside a projection", func(d *Document) (any, error) {
			return d.Query("sort(request.object.spec.containers[].keys(@)[] || `[]`)")
		}, false},
		{"a query naming images", func(d *Document) (any, error) { return d.Query("images.containers.app.tag") }, true},
		{"images in a function argument", func(d *Document) (any, error) { return d.Query("length(images.containers)") }, true},
		{"the whole document", func(d *Document) (any, error) { return d.Query("sort(keys(@))") }, true},
		{"a pipe from the root", func(d *Document) (any, error) { return d.Query("@ | images.containers.app.name") }, true},
		{"Get under images", func(d *Document) (any, error) { v, _ := d.Get("images.containers.app.registry"); return v, nil }, true},
		{"Get of another entry", func(d *Document) (any, error) { v, _ := d.Get("request.name"); return v, nil }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := lazy(jp)
			got, err := tc.read(d)
			want, wantErr := tc.read(eager)
			if !reflect.DeepEqual(got, want) || (err == nil) != (wantErr == nil) {
				t.Errorf("lazy document read %v (%v), want %v (%v) as with images up front", got, err, want, wantErr)
			}
			if computed(d) != tc.needs {
				t.Errorf("images worked out: %v, want %v", computed(d), tc.needs)
			}
			// A querier that cannot tell always gets the images.
			d = lazy(searchOnly{jp})
			if _, _ = tc.read(d); !computed(d) && strings.HasPrefix(tc.name, "a query") {
				t.Error("images left out for a querier that cannot tell what an expression reads")
			}
		})
	}

	// Layers share one computation; Set below images keeps the rest of
	// them; SetRoot replaces them for good.
	calls := 0
	base := New(jp, map[string]any{"request": map[string]any{}})
	base.Lazy("images", func() any {
		calls++
		return map[string]any{"containers": map[string]any{"app": map[string]any{"tag": "1.2", "name": "app"}}}
	})
	a, b := base.Child(), base.Child()
	if v, _ := a.Query("images.containers.app.tag"); v != "1.2" {
		t.Errorf("child reads tag %v", v)
	}
	b.Set("images.containers.app.tag", "9")
	if v, _ := b.Query("images.containers.app.name"); v != "app" {
		t.Errorf("Set below images lost the rest of them: name %v", v)
	}
	if v, _ := b.Query("images.containers.app.tag"); v != "9" {
		t.Errorf("Set below images: tag %v, want 9", v)
	}
	if calls != 1 {
		t.Errorf("images worked out %d times for one request, want 1", calls)
	}
	c := base.Child()
	c.SetRoot("images", "pinned")
	if v, _ := c.Query("images"); v != "pinned" {
		t.Errorf("SetRoot(images) then read %v, want pinned", v)
	}
	none := New(jp, map[string]any{})
	none.Lazy("images", func() any { return nil })
	if _, ok := none.Root()["images"]; ok {
		t.Error("a nil lazy value became an entry")
	}
}
