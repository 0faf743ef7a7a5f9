// Package check decides whether a rendered revision may be applied. Every
// object must name its apiVersion, kind and name; every object of a kind
// charter's scheme knows must decode strictly (no unknown or duplicate
// field); every Kyverno policy and exception must compile with
// engine.Compile; and no policy may enforce with a feature charter cannot
// run in the cluster (engine.UnsupportedFeatures, the same check as policy
// admission), so a revision never installs a policy that looks enforced
// while it does nothing. Kinds the scheme does not know are left to the
// API server's dry-run, which runs with strict field validation.
//
// A revision is applied whole or not at all, so Objects reports every
// fault at once, each naming the file, the object and the field.
package check

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/strict"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// Fault is one reason a revision cannot be applied.
type Fault struct {
	// File is the repository file that declares the object.
	File string
	// Object is "Kind namespace/name" or "Kind name".
	Object string
	// Field is the path inside the object, when known.
	Field string
	// Message says what is wrong.
	Message string
}

func (f Fault) String() string {
	var b strings.Builder
	if f.File != "" {
		b.WriteString(f.File)
		b.WriteString(": ")
	}
	b.WriteString(f.Object)
	if f.Field != "" {
		b.WriteString(": ")
		b.WriteString(f.Field)
	}
	b.WriteString(": ")
	b.WriteString(f.Message)
	return b.String()
}

// Error is every fault of a revision.
type Error struct {
	Faults []Fault
}

func (e *Error) Error() string {
	msgs := make([]string, len(e.Faults))
	for i, f := range e.Faults {
		msgs[i] = f.String()
	}
	if len(msgs) == 1 {
		return "invalid revision: " + msgs[0]
	}
	return fmt.Sprintf("invalid revision, %d faults: %s", len(msgs), strings.Join(msgs, "; "))
}

// Option configures Objects.
type Option func(*options)

type options struct{ allowNamespacedCalls bool }

// AllowNamespacedCalls admits namespaced policies that call out (apiCall
// service URLs, CEL http), as charter serve
// --allow-http-in-namespaced-policies does at admission; without it
// Objects refuses them as policy admission does
// (loaders.NamespacedCallFaults), naming the file and field.
func AllowNamespacedCalls(allow bool) Option {
	return func(o *options) { o.allowNamespacedCalls = allow }
}

// Objects checks a rendered revision; scheme holds the kinds decoded
// strictly. It returns *Error when anything is wrong.
//
// Each policy is compiled on its own as soon as it is decoded, then
// dropped: compiling one needs nothing of the others, and a sync's memory
// peaks here, with the whole revision decoded, so it should not also hold
// hundreds of compiled policies at once.
func Objects(objs []build.Object, scheme *runtime.Scheme, opts ...Option) error {
	var checks options
	for _, opt := range opts {
		opt(&checks)
	}
	var faults []Fault
	var exceptions []*kyvernov2.PolicyException
	// exceptionFiles maps an exception's engine key, as compile errors
	// name it, back to its file.
	exceptionFiles := map[string]string{}
	// policyFiles maps each policy's engine key to the file that declared
	// it first.
	policyFiles := map[string]string{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		ref := describe(o)
		if o.GetAPIVersion() == "" || gvk.Kind == "" || o.GetName() == "" {
			faults = append(faults, Fault{File: o.File, Object: ref, Message: "an object needs apiVersion, kind and metadata.name"})
			continue
		}
		typed, err := decode(scheme, gvk, o)
		if err != nil {
			faults = append(faults, Fault{File: o.File, Object: ref, Message: err.Error()})
			continue
		}
		if !checks.allowNamespacedCalls {
			for _, f := range loaders.NamespacedCallFaults(gvk.Group, gvk.Kind, o.Object) {
				faults = append(faults, Fault{File: o.File, Object: ref, Field: f.Field, Message: f.Message})
			}
		}
		// Every served version is checked as its hub type
		// (policies.kyverno.io/v1alpha1 as v1, ...).
		switch v := versions.ToHub(typed).(type) {
		case *kyvernov1.ClusterPolicy:
			faults = append(faults, compilePolicy(v, "ClusterPolicy/"+v.GetName(), o.File, policyFiles)...)
		case *kyvernov1.Policy:
			faults = append(faults, compilePolicy(v, "Policy/"+v.GetNamespace()+"/"+v.GetName(), o.File, policyFiles)...)
		case *kyvernov2.PolicyException:
			exceptions = append(exceptions, v)
			exceptionFiles[exceptionKey(v)] = o.File
		case *kyvernov2.ClusterCleanupPolicy:
			faults = append(faults, unsupportedFaults(engine.UnsupportedFeatures(v), o.File)...)
		case *kyvernov2.CleanupPolicy:
			faults = append(faults, unsupportedFaults(engine.UnsupportedFeatures(v), o.File)...)
		case *policiesv1.ValidatingPolicy:
			faults = append(faults, compilePolicy(v, "ValidatingPolicy/"+v.GetName(), o.File, policyFiles)...)
		case *policiesv1.NamespacedValidatingPolicy:
			faults = append(faults, compilePolicy(v, "NamespacedValidatingPolicy/"+v.GetNamespace()+"/"+v.GetName(), o.File, policyFiles)...)
		case *policiesv1.MutatingPolicy:
			faults = append(faults, compilePolicy(v, "MutatingPolicy/"+v.GetName(), o.File, policyFiles)...)
		case *policiesv1.NamespacedMutatingPolicy:
			faults = append(faults, compilePolicy(v, "NamespacedMutatingPolicy/"+v.GetNamespace()+"/"+v.GetName(), o.File, policyFiles)...)
		case *policiesv1.GeneratingPolicy:
			faults = append(faults, compilePolicy(v, "GeneratingPolicy/"+v.GetName(), o.File, policyFiles)...)
		case *policiesv1.NamespacedGeneratingPolicy:
			faults = append(faults, compilePolicy(v, "NamespacedGeneratingPolicy/"+v.GetNamespace()+"/"+v.GetName(), o.File, policyFiles)...)
		case *policiesv1.ImageValidatingPolicy:
			faults = append(faults, compilePolicy(v, "ImageValidatingPolicy/"+v.GetName(), o.File, policyFiles)...)
		case *policiesv1.NamespacedImageValidatingPolicy:
			faults = append(faults, compilePolicy(v, "NamespacedImageValidatingPolicy/"+v.GetNamespace()+"/"+v.GetName(), o.File, policyFiles)...)
		case *policiesv1.DeletingPolicy:
			if _, err := engine.CompileCleanupPolicy(v); err != nil {
				faults = append(faults, compileFaults(err, map[string]string{"DeletingPolicy/" + v.GetName(): o.File})...)
			}
		case *policiesv1.NamespacedDeletingPolicy:
			if _, err := engine.CompileCleanupPolicy(v); err != nil {
				faults = append(faults, compileFaults(err, map[string]string{"NamespacedDeletingPolicy/" + v.GetNamespace() + "/" + v.GetName(): o.File})...)
			}
		case *policiesv1.PolicyException:
			if _, err := engine.Compile(nil, engine.WithCELExceptions([]*policiesv1.PolicyException{v})); err != nil {
				key := "PolicyException/" + v.GetName()
				if v.GetNamespace() != "" {
					key = "PolicyException/" + v.GetNamespace() + "/" + v.GetName()
				}
				faults = append(faults, compileFaults(err, map[string]string{key: o.File})...)
			}
		}
	}
	if len(exceptions) > 0 {
		if _, err := engine.Compile(nil, engine.WithExceptions(exceptions)); err != nil {
			faults = append(faults, compileFaults(err, exceptionFiles)...)
		}
	}
	if len(faults) == 0 {
		return nil
	}
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].File < faults[j].File })
	return &Error{Faults: faults}
}

// compilePolicy compiles one policy, declared in file; key is how compile
// errors name it. seen holds the keys compiled so far and their files.
func compilePolicy(p kyvernov1.PolicyInterface, key, file string, seen map[string]string) []Fault {
	if first, dup := seen[key]; dup {
		return []Fault{{File: file, Object: fmt.Sprintf("%s %q", p.GetKind(), strings.TrimPrefix(key, p.GetKind()+"/")),
			Message: "declared again (first in " + first + ")"}}
	}
	seen[key] = file
	set, err := engine.Compile([]kyvernov1.PolicyInterface{p})
	if err != nil {
		return compileFaults(err, map[string]string{key: file})
	}
	return unsupportedFaults(set.Unsupported(), file)
}

// unsupportedFaults are the findings that stop a revision: features
// charter cannot run in the cluster, used by a rule that enforces.
// Policy admission would refuse the same policy; one that only audits is
// applied, and its status says Unsupported.
func unsupportedFaults(found engine.UnsupportedList, file string) []Fault {
	var faults []Fault
	for _, u := range found.In(engine.InCluster).Enforced() {
		faults = append(faults, Fault{
			File:    file,
			Object:  fmt.Sprintf("%s %q", u.Kind, u.Name),
			Field:   u.Field,
			Message: u.Fault(),
		})
	}
	return faults
}

func exceptionKey(ex *kyvernov2.PolicyException) string {
	if ex.GetNamespace() == "" {
		return "PolicyException/" + ex.GetName()
	}
	return "PolicyException/" + ex.GetNamespace() + "/" + ex.GetName()
}

// decode strictly decodes o into its typed form when the scheme knows its
// kind; it returns nil, nil for other kinds.
func decode(scheme *runtime.Scheme, gvk schema.GroupVersionKind, o build.Object) (runtime.Object, error) {
	if scheme == nil || !scheme.Recognizes(gvk) {
		return nil, nil
	}
	typed, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return nil, err
	}
	if err := strict.Unmarshal(data, typed); err != nil {
		return nil, err
	}
	return typed, nil
}

func compileFaults(err error, files map[string]string) []Fault {
	errs, ok := err.(engine.CompileErrors)
	if !ok {
		return []Fault{{Object: "policies", Message: err.Error()}}
	}
	faults := make([]Fault, 0, len(errs))
	for _, e := range errs {
		key := e.Kind + "/" + e.Name
		faults = append(faults, Fault{
			File:    files[key],
			Object:  fmt.Sprintf("%s %q", e.Kind, e.Name),
			Field:   e.Field,
			Message: e.Fault,
		})
	}
	return faults
}

func describe(o build.Object) string {
	kind := o.GetKind()
	if kind == "" {
		kind = "object"
	}
	name := o.GetName()
	if ns := o.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s %q", kind, name)
}
