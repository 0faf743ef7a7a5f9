package celruntime

import (
	"reflect"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/loader"
)

// The parts of Kyverno's resource library beyond reading objects (spec
// cel-policy-types.md §4): resource.Post creates an object (typically a
// SubjectAccessReview, whose answer is the object returned) and
// resource.ToGVR maps a kind to its resource, which resource.Get and
// resource.List also take in place of apiVersion and resource.

var reflectMapStringString = reflect.TypeFor[map[string]string]()

// gvrType is what resource.ToGVR returns: {group, version, resource}.
var gvrType = celgo.MapType(celgo.StringType, celgo.StringType)

func resourceWriteOptions() []celgo.EnvOption {
	var opts []celgo.EnvOption
	opts = append(opts, celenv.Method("ToGVR",
		celenv.Member("resource_to_gvr", []*celgo.Type{resourceLibType, str, str}, gvrType, resourceToGVR),
	)...)
	return opts
}

// resourcePostOverloads extend the method Post (which http shares).
func resourcePostOverloads() []func(string) celgo.FunctionOpt {
	return []func(string) celgo.FunctionOpt{
		celenv.Member("resource_post", []*celgo.Type{resourceLibType, str, str, dyn}, dyn, resourcePost),
		celenv.Member("resource_post_ns", []*celgo.Type{resourceLibType, str, str, str, dyn}, dyn, resourcePost),
	}
}

// resourceGVROverloads extend Get and List with a GVR from ToGVR in
// place of apiVersion and resource.
func resourceGetGVROverloads() []func(string) celgo.FunctionOpt {
	return []func(string) celgo.FunctionOpt{
		celenv.Member("resource_get_gvr", []*celgo.Type{resourceLibType, gvrType, str, str}, dyn, resourceGetGVR),
	}
}

func resourceListGVROverloads() []func(string) celgo.FunctionOpt {
	return []func(string) celgo.FunctionOpt{
		celenv.Member("resource_list_gvr", []*celgo.Type{resourceLibType, gvrType, str}, dyn, resourceListGVR),
		celenv.Member("resource_list_gvr_labels", []*celgo.Type{resourceLibType, gvrType, str, strs}, dyn, resourceListGVR),
	}
}

// gvrArg reads a GVR argument as (apiVersion, resource).
func gvrArg(v ref.Val) (apiVersion, resource string, ok bool) {
	m, err := v.ConvertToNative(reflectMapStringString)
	if err != nil {
		return "", "", false
	}
	gvr := m.(map[string]string)
	gv := schema.GroupVersion{Group: gvr["group"], Version: gvr["version"]}
	if gv.Version == "" || gvr["resource"] == "" {
		return "", "", false
	}
	return gv.String(), gvr["resource"], true
}

func resourceGetGVR(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	apiVersion, resource, ok2 := gvrArg(args[1])
	s, ok3 := strArgs(args[2:], 2)
	if !ok || !ok2 || !ok3 {
		return types.NewErr("resource.Get: want (gvr, namespace, name)")
	}
	return c.get(apiVersion, resource, s[0], s[1])
}

func resourceListGVR(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	apiVersion, resource, ok2 := gvrArg(args[1])
	s, ok3 := strArgs(args[2:], 1)
	if !ok || !ok2 || !ok3 {
		return types.NewErr("resource.List: want (gvr, namespace[, labels])")
	}
	var sel map[string]string
	if len(args) == 4 {
		m, err := args[3].ConvertToNative(reflectMapStringString)
		if err != nil {
			return types.NewErr("resource.List: labels: %v", err)
		}
		sel = m.(map[string]string)
	}
	return c.list(apiVersion, resource, s[0], sel)
}

func resourceToGVR(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 2)
	if !ok || !ok2 {
		return types.NewErr("resource.ToGVR: want (apiVersion, kind)")
	}
	m, ok := c.loaders.Resources.(loader.ResourceMapper)
	if !ok {
		return types.NewErr("failed to map kind to resource: no resource mapper (resource.ToGVR is not available here)")
	}
	gvr, err := m.ResourceFor(s[0], s[1])
	if err != nil {
		return types.NewErr("failed to map kind to resource: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(map[string]string{"group": gvr.Group, "version": gvr.Version, "resource": gvr.Resource})
}

// resourcePost is Post(apiVersion, resource, data) and Post(apiVersion,
// resource, namespace, data). The short form creates a cluster-scoped
// object, or, for a namespaced policy, one in the policy's namespace; a
// namespaced policy creates nothing elsewhere (the loader refuses a
// cluster-scoped resource in a namespace).
func resourcePost(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	n := len(args) - 2 // the string arguments
	s, ok2 := strArgs(args[1:], n)
	if !ok || !ok2 {
		return types.NewErr("resource.Post: want (apiVersion, resource[, namespace], data)")
	}
	namespace := c.namespace
	if n == 3 {
		namespace = s[2]
	}
	if c.namespace != "" && namespace != c.namespace {
		return types.NewErr("failed to create resource: a namespaced policy creates objects only in its own namespace %q", c.namespace)
	}
	w, ok := c.loaders.Resources.(loader.ResourceCreator)
	if !ok {
		return types.NewErr("failed to create resource: no resource writer (resource.Post is not available here)")
	}
	data, err := JSONValue(args[len(args)-1])
	if err != nil {
		return types.NewErr("failed to create resource: data: %v", err)
	}
	obj, ok := data.(map[string]any)
	if !ok {
		return types.NewErr("failed to create resource: data must be an object")
	}
	created, err := w.CreateResource(c.ctx, c.namespace, s[0], s[1], namespace, obj)
	if err != nil {
		return types.NewErr("failed to create resource: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(created)
}
