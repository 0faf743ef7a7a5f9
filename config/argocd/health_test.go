// Package argocd holds charter's Argo CD setup (kustomize): the
// Applications and the argocd-cm Component with the health checks. Its tests
// render them and run each health check as Argo CD does, in a Lua VM.
package argocd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// healthKeyPrefix is where Argo CD reads a kind's Lua health check in
// argocd-cm: resource.customizations.health.<group>_<kind>.
const healthKeyPrefix = "resource.customizations.health."

// health is what an Argo CD health script returns.
type health struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func TestHealthChecks(t *testing.T) {
	cm := renderedArgoCDConfigMap(t)
	tests := []struct {
		sample      string
		wantStatus  string
		wantMessage string // a part of the message
	}{
		{"clusterpolicy-ready.yaml", "Healthy", ""},
		{"clusterpolicy-unsupported.yaml", "Degraded", "Unsupported: spec.rules[0].validate.assert: not supported in the cluster"},
		{"clusterpolicy-stale-generation.yaml", "Progressing", "generation 3 (Ready is for generation 2)"},
		{"clusterpolicy-no-status.yaml", "Progressing", "waiting for charter to report the Ready condition"},
		{"clusterpolicy-no-observed-generation.yaml", "Progressing", "(Ready is for generation nil)"},
		{"policy-ready.yaml", "Healthy", ""},
		{"policy-failed.yaml", "Degraded", `Failed: spec.rules[0].validate.pattern.spec.containers[0]: unknown anchor "~(x)"`},
		{"policyrepository-ready.yaml", "Healthy", "ReconciliationSucceeded: applied revision main@sha1:0123abc"},
		{"policyrepository-reconciling.yaml", "Progressing", "Progressing: applying revision main@sha1:4567def"},
		{"policyrepository-stalled.yaml", "Degraded", "BuildFailed: kustomize build environments/prod: missing resource ../base"},
		{"policyrepository-retrying.yaml", "Degraded", "GitOperationFailed: fetch https://git.example.com/policies.git: connection refused"},
		{"policyrepository-first-fetch.yaml", "Progressing", "Progressing: fetching main"},
		{"policyrepository-suspended.yaml", "Suspended", "spec.suspend"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.sample, ".yaml"), func(t *testing.T) {
			obj := readSample(t, filepath.Join("testdata", "health", tt.sample))
			gvk := obj.GroupVersionKind()
			key := healthKeyPrefix + gvk.Group + "_" + gvk.Kind
			script, ok := cm.Data[key]
			if !ok {
				t.Fatalf("argocd-cm has no %s: Argo CD would not assess %s", key, gvk.Kind)
			}
			got, err := runHealthCheck(script, obj.Object)
			if err != nil {
				t.Fatalf("%s on %s: %v", key, tt.sample, err)
			}
			if got.Status != tt.wantStatus || !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("health = %s %q, want %s with message containing %q", got.Status, got.Message, tt.wantStatus, tt.wantMessage)
			}
		})
	}
}

// TestArgoCDConfigMapComponent checks the Component merges into Argo CD's
// own argocd-cm: its keys added, the install's keys kept, each health key
// the shipped script.
func TestArgoCDConfigMapComponent(t *testing.T) {
	cm := renderedArgoCDConfigMap(t)
	if cm.Name != "argocd-cm" || cm.Namespace != "argocd" {
		t.Errorf("rendered ConfigMap %s/%s, want argocd/argocd-cm (no name suffix: Argo CD reads it by name)", cm.Namespace, cm.Name)
	}
	if cm.Data["url"] != "https://argocd.example.com" {
		t.Errorf("the install's own key url was lost: %q", cm.Data["url"])
	}
	if cm.Labels["app.kubernetes.io/part-of"] != "argocd" {
		t.Errorf("the install's labels were lost: %v", cm.Labels)
	}
	script, err := os.ReadFile(filepath.Join("argocd-cm", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"kyverno.io_ClusterPolicy", "kyverno.io_Policy", "gitops.charter.dev_PolicyRepository"} {
		if got := cm.Data[healthKeyPrefix+kind]; got != string(script) {
			t.Errorf("%s%s is not argocd-cm/health.lua (%d bytes, want %d)", healthKeyPrefix, kind, len(got), len(script))
		}
	}
	if got := cm.Data["kustomize.buildOptions"]; got != "--load-restrictor LoadRestrictionsNone" {
		t.Errorf("kustomize.buildOptions = %q: environments/ load policy files outside their folder", got)
	}
}

// TestApplications renders config/argocd and each Application's source the
// way Argo CD builds it (kustomize, with argocd-cm's build options), and
// checks every kind the policies Application syncs has a health check.
func TestApplications(t *testing.T) {
	apps := map[string]*unstructured.Unstructured{}
	for _, res := range render(t, ".", krusty.MakeDefaultOptions()).Resources() {
		m, err := res.Map()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() != "Application" || u.GetAPIVersion() != "argoproj.io/v1alpha1" {
			t.Fatalf("config/argocd renders %s %s: only Applications belong there", u.GetAPIVersion(), u.GetKind())
		}
		if u.GetNamespace() != "argocd" {
			t.Errorf("Application %s in namespace %q, want argocd", u.GetName(), u.GetNamespace())
		}
		apps[u.GetName()] = u
	}
	cm := renderedArgoCDConfigMap(t)
	argoOpts := krusty.MakeDefaultOptions()
	if strings.Contains(cm.Data["kustomize.buildOptions"], "LoadRestrictionsNone") {
		argoOpts.LoadRestrictions = types.LoadRestrictionsNone
	}
	for name, wantPath := range map[string]string{"charter": "config/default", "charter-policies-staging": "environments/staging"} {
		app, ok := apps[name]
		if !ok {
			t.Errorf("no Application %s", name)
			continue
		}
		path, _, _ := unstructured.NestedString(app.Object, "spec", "source", "path")
		if path != wantPath {
			t.Errorf("Application %s syncs %q, want %q", name, path, wantPath)
		}
		rendered := render(t, filepath.Join("..", "..", filepath.FromSlash(path)), argoOpts)
		if rendered.Size() == 0 {
			t.Errorf("Application %s: %s renders nothing", name, path)
		}
		if name != "charter-policies-staging" {
			continue
		}
		for _, res := range rendered.Resources() {
			gvk := res.GetGvk()
			if gvk.Group != "kyverno.io" && gvk.Group != "gitops.charter.dev" {
				continue
			}
			if _, ok := cm.Data[healthKeyPrefix+gvk.Group+"_"+gvk.Kind]; !ok {
				t.Errorf("%s syncs %s %s, which has no health check in argocd-cm", path, gvk.Kind, res.GetName())
			}
		}
	}
	if len(apps) != 2 {
		t.Errorf("config/argocd renders %d Applications, want 2", len(apps))
	}
}

// runHealthCheck runs script as Argo CD runs a health customization: obj
// is a global holding the object, the script returns {status, message}.
// Only the base, table and string libraries are open, fewer than Argo CD
// opens, so a script that runs here runs there.
func runHealthCheck(script string, obj map[string]any) (health, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for name, open := range map[string]lua.LGFunction{lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable, lua.StringLibName: lua.OpenString} {
		L.Push(L.NewFunction(open))
		L.Push(lua.LString(name))
		L.Call(1, 0)
	}
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return health{}, err
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return health{}, fmt.Errorf("script returned %s, want a table", L.Get(-1).Type())
	}
	var hs health
	if s, ok := ret.RawGetString("status").(lua.LString); ok {
		hs.Status = string(s)
	}
	if m, ok := ret.RawGetString("message").(lua.LString); ok {
		hs.Message = string(m)
	}
	switch hs.Status {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
		return hs, nil
	}
	return hs, fmt.Errorf("script returned status %q, which Argo CD does not know", hs.Status)
}

// toLua converts a JSON value to Lua as Argo CD does: objects and arrays
// to tables (arrays 1-based), numbers to numbers.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	panic(fmt.Sprintf("no Lua value for %T", v))
}

func readSample(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(js, &obj.Object); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return obj
}

// renderedArgoCDConfigMap is argocd-cm after the Component merged into a
// stand-in of Argo CD's install (testdata/argocd-install).
func renderedArgoCDConfigMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	resources := render(t, filepath.Join("testdata", "argocd-install"), krusty.MakeDefaultOptions()).Resources()
	if len(resources) != 1 {
		t.Fatalf("argocd-install renders %d objects, want argocd-cm alone", len(resources))
	}
	m, err := resources[0].Map()
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func render(t *testing.T, dir string, opts *krusty.Options) resmap.ResMap {
	t.Helper()
	rendered, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return rendered
}
