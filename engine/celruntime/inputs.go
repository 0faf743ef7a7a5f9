package celruntime

import (
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// Inputs are a request's CEL variables other than params and variables,
// built once per request and shared by every CEL rule.
type Inputs struct {
	Object, OldObject ref.Val
	// request and namespace are built on first read (requestValue,
	// namespaceValue): most policies never read them, and building them
	// allocates a dozen maps, or looks the namespace up.
	Request, Namespace ref.Val
	view               *review.View
	// adapter wraps the request's values for every expression of every
	// policy that reads them.
	Adapter celenv.SharedAdapter
	// sharedVariables are the values of the policies' variables that
	// depend on the request alone, by canonical expression (celVariables).
	SharedVariables sharedValues
	// namespaceObject is what namespace wraps.
	namespaceObject map[string]any
	// sizes are inputSizes' answers by input, once asked (measured
	// false before).
	sizes    [celenv.InputCount]celenv.InputBound
	measured [celenv.InputCount]bool
}

// InputSizes are the length of the longest string and the size of the
// largest list or map in the inputs of reads (a set of 1<<input), or past
// celenv.LargestBound: what decides whether a bounded ValidatingPolicy variant,
// which reads those, may run untracked (celcost.go). Each input is
// measured once per request.
func (ci *Inputs) InputSizes(reads uint8) celenv.InputBound {
	var size celenv.InputBound
	for i := range celenv.InputCount {
		if reads&(1<<i) == 0 {
			continue
		}
		if !ci.measured[i] {
			ci.sizes[i], ci.measured[i] = ci.measure(i), true
		}
		size.Strings = max(size.Strings, ci.sizes[i].Strings)
		size.Lists = max(size.Lists, ci.sizes[i].Lists)
	}
	return size
}

// measure is inputSizes for one input.
func (ci *Inputs) measure(i int) celenv.InputBound {
	in := ci.view
	switch i {
	case celenv.InputObject:
		return celenv.ValueSizes(in.Req.Object, celenv.LargestBound)
	case celenv.InputOldObject:
		return celenv.ValueSizes(in.Req.OldObject, celenv.LargestBound)
	case celenv.InputNamespace:
		ci.namespaceValue()
		return celenv.ValueSizes(ci.namespaceObject, celenv.LargestBound)
	}
	// request, by the fields admissionRequest reads, without building it.
	u := in.Req.UserInfo
	size := celenv.InputBound{Lists: max(len(u.Groups), len(u.Extra)),
		Strings: max(len(u.Username), len(u.UID),
			len(in.Res.Name), len(in.Res.Namespace), len(in.Req.SubResource), len(in.Op),
			len(in.GVK.Group), len(in.GVK.Version), len(in.GVK.Kind),
			len(in.Req.Resource.Group), len(in.Req.Resource.Version), len(in.Req.Resource.Resource))}
	for _, g := range u.Groups {
		size.Strings = max(size.Strings, len(g))
	}
	for k, vals := range u.Extra {
		size.Strings = max(size.Strings, len(k))
		size.Lists = max(size.Lists, len(vals))
		for _, v := range vals {
			size.Strings = max(size.Strings, len(v))
		}
	}
	// request.object and request.oldObject are the objects.
	for _, obj := range []int{celenv.InputObject, celenv.InputOldObject} {
		o := ci.InputSizes(1 << obj)
		size.Strings = max(size.Strings, o.Strings)
		size.Lists = max(size.Lists, o.Lists)
	}
	return size
}

// InputsOf builds the request's CEL variables on first use.
func InputsOf(in *review.View) *Inputs {
	if ci, ok := in.CEL.(*Inputs); ok {
		return ci
	}
	ci := &Inputs{Object: types.NullValue, OldObject: types.NullValue, view: in}
	ci.Adapter.UseHints()
	if in.Req.Object != nil {
		ci.Object = ci.Adapter.NativeToValue(in.Req.Object)
	}
	if in.Req.OldObject != nil {
		ci.OldObject = ci.Adapter.NativeToValue(in.Req.OldObject)
	}
	in.CEL = ci
	return ci
}

// namespaceValue is `namespaceObject`, built on first use: the namespace
// object from the loader, or what the engine knows of the namespace (its
// name and labels), or null for a cluster-scoped object or a Namespace.
func (ci *Inputs) namespaceValue() ref.Val {
	if ci.Namespace != nil {
		return ci.Namespace
	}
	ci.Namespace = types.NullValue
	in := ci.view
	ns := in.Res.Namespace
	if ns == "" || (in.GVK.Kind == "Namespace" && in.GVK.Group == "") {
		return ci.Namespace
	}
	if l, ok := in.Opts.Loaders.Namespaces.(loader.NamespaceObjectLoader); ok {
		if obj, err := l.NamespaceObject(in.Ctx, ns); err == nil && obj != nil {
			ci.namespaceObject = obj
		}
	}
	if ci.namespaceObject == nil {
		// The part of namespaceObject a policy can rely on here.
		meta := map[string]any{"name": ns}
		if labels := in.NamespaceLabels(); len(labels) > 0 {
			l := make(map[string]any, len(labels))
			for k, v := range labels {
				l[k] = v
			}
			meta["labels"] = l
		}
		ci.namespaceObject = map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
	}
	ci.Namespace = ci.Adapter.NativeToValue(ci.namespaceObject)
	return ci.Namespace
}

// RequestValue is `request`, built on first use.
func (ci *Inputs) RequestValue() ref.Val {
	if ci.Request == nil {
		ci.Request = ci.Adapter.NativeToValue(admissionRequest(ci.view, ci.view.Op))
	}
	return ci.Request
}

// admissionRequest is the AdmissionRequest exposed as `request`: VAP's,
// plus the objects, which Kyverno's CEL policies read there too.
func admissionRequest(in *review.View, op kyvernov1.AdmissionOperation) map[string]any {
	gvk := map[string]any{"group": in.GVK.Group, "version": in.GVK.Version, "kind": in.GVK.Kind}
	gvr := map[string]any{"group": in.Req.Resource.Group, "version": in.Req.Resource.Version, "resource": in.Req.Resource.Resource}
	u := in.Req.UserInfo
	groups := make([]any, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = g
	}
	user := map[string]any{"username": u.Username, "uid": u.UID, "groups": groups}
	if len(u.Extra) > 0 {
		extra := make(map[string]any, len(u.Extra))
		for k, vals := range u.Extra {
			list := make([]any, len(vals))
			for i, v := range vals {
				list[i] = v
			}
			extra[k] = list
		}
		user["extra"] = extra
	}
	// object and oldObject are there for Kyverno's CEL policies, whose
	// request type declares them (withRequestVariables); VAP's does not.
	var object, oldObject any
	if in.Req.Object != nil {
		object = in.Req.Object
	}
	if in.Req.OldObject != nil {
		oldObject = in.Req.OldObject
	}
	return map[string]any{
		"object":             object,
		"oldObject":          oldObject,
		"kind":               gvk,
		"resource":           gvr,
		"subResource":        in.Req.SubResource,
		"requestKind":        gvk,
		"requestResource":    gvr,
		"requestSubResource": in.Req.SubResource,
		"name":               in.Res.Name,
		"namespace":          in.Res.Namespace,
		"operation":          string(op),
		"userInfo":           user,
		"dryRun":             in.Req.DryRun,
	}
}

// Activation resolves the variables of one CEL evaluation.
type Activation struct {
	In        *Inputs
	Object    ref.Val
	OldObject ref.Val
	// request nil is the request's own (celInputs.requestValue).
	Request   ref.Val
	Params    ref.Val
	Variables ref.Val
	// wantedAuthorizer records that an expression asked for authorizer
	// and the evaluation has none to bind.
	WantedAuthorizer bool
	// scope is the namespace of a namespaced policy, which its authorizer
	// checks stay in; "" for a cluster policy.
	Scope string
	// authorizer and requestResourceAuthorizer are bound on first read.
	authorizer, requestResourceAuthorizer ref.Val
}

func (a *Activation) ResolveName(name string) (any, bool) {
	switch name {
	case plugincel.ObjectVarName:
		return a.Object, true
	case plugincel.OldObjectVarName:
		return a.OldObject, true
	case plugincel.RequestVarName:
		if a.Request == nil {
			return a.In.RequestValue(), true
		}
		return a.Request, true
	case plugincel.NamespaceVarName:
		return a.In.namespaceValue(), true
	case plugincel.ParamsVarName:
		return a.Params, true
	case plugincel.VariableVarName:
		return a.Variables, true
	case plugincel.AuthorizerVarName, plugincel.RequestResourceAuthorizerVarName:
		if v := a.authorizerValue(name); v != nil {
			return v, true
		}
		a.WantedAuthorizer = true
	}
	return nil, false
}

func (a *Activation) Parent() interpreter.Activation { return nil }

// celActivation binds the request's CEL variables. replay evaluates the
// old object as the object of a CREATE.
func ActivationOf(in *review.View, replay bool) *Activation {
	ci := InputsOf(in)
	act := &Activation{In: ci, Object: ci.Object, OldObject: ci.OldObject, Params: types.NullValue}
	if replay {
		act.Object = ci.OldObject
		act.OldObject = types.NullValue
		act.Request = types.DefaultTypeAdapter.NativeToValue(admissionRequest(in, kyvernov1.Create))
	}
	return act
}
