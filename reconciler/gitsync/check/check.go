// Package check decides whether a rendered revision may be applied. Every
// object must name its apiVersion, kind and name; every object of a kind
// charter's scheme knows must decode strictly (no unknown or duplicate
// field); every Kyverno policy, exception and GlobalContextEntry must
// pass policycheck.InCluster, the very check policy admission makes (every
// check of Kyverno's policy validation, docs/policy-validation.md); and
// no policy may enforce with a feature charter cannot run in the cluster
// (unsupported.Features), so a revision never installs a policy
// that looks enforced while it does nothing. Kinds the scheme does not know are left to the
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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/api/strict"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/unsupported"
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
	// Ref is the object a warning is about (Warnings); nil for faults.
	Ref *corev1.ObjectReference
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

type options struct {
	allowNamespacedCalls bool
	warnings             *[]Fault
	cluster              policycheck.Cluster
	askAbout             func(build.Object) bool
}

// Cluster has Objects ask the cluster what Kyverno's policy validation
// asks it (policycheck.InCluster: the kinds rules name are served), as
// policy admission does; the kinds the revision's own
// CustomResourceDefinitions define count as served. Without it those
// checks are left to policy admission.
func Cluster(c policycheck.Cluster) Option {
	return func(o *options) { o.cluster = c }
}

// AskAbout limits what the Cluster option asks the cluster to the
// objects ask accepts; the others are checked as without it (their
// compile faults, no answer of the cluster's). gitsync asks only about
// the objects the repository's ServiceAccount may write: the answers
// (what charter's controllers may do, which GlobalContextEntries are
// Ready) are what policy admission tells whoever writes the object, and
// the API server lets no one else reach admission.
func AskAbout(ask func(build.Object) bool) Option {
	return func(o *options) { o.askAbout = ask }
}

// AllowNamespacedCalls admits namespaced policies that call out (apiCall
// service URLs, CEL http), as charter serve
// --allow-http-in-namespaced-policies does at admission; without it
// Objects refuses them as policy admission does
// (loaders.NamespacedCallFaults), naming the file and field.
func AllowNamespacedCalls(allow bool) Option {
	return func(o *options) { o.allowNamespacedCalls = allow }
}

// Warnings collects into dst the warnings Kyverno gives when it admits a
// policy of the revision (deprecated operators, lower-case actions, ...:
// cpol.Warnings), each naming the file and the object. They do
// not stop the revision, as they do not stop policy admission; whoever
// applies it should still see them.
func Warnings(dst *[]Fault) Option {
	return func(o *options) { o.warnings = dst }
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
	var cluster policycheck.Cluster
	if checks.cluster != nil {
		cluster = withRevisionCRDs{cluster: checks.cluster, defined: revisionCRDKinds(objs)}
	}
	var faults []Fault
	// policyFiles maps each policy's kind, namespace and name to the
	// file that declared it first.
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
		if typed == nil {
			continue
		}
		// Every served version is checked as its hub type
		// (policies.kyverno.io/v1alpha1 as v1, ...), by the check policy
		// admission makes (policycheck.Object).
		hub := versions.ToHub(typed)
		if !policycheck.Checked(hub) {
			continue
		}
		if p, ok := hub.(kyvernov1.PolicyInterface); ok {
			key := p.GetKind() + "/" + p.GetNamespace() + "/" + p.GetName()
			if first, dup := policyFiles[key]; dup {
				faults = append(faults, Fault{File: o.File, Object: ref, Message: "declared again (first in " + first + ")"})
				continue
			}
			policyFiles[key] = o.File
		}
		asked := cluster
		if cluster != nil && checks.askAbout != nil && !checks.askAbout(o) {
			asked = nil
		}
		res, err := policycheck.InCluster(hub, asked)
		if err != nil {
			faults = append(faults, objectFaults(err, o.File, ref)...)
			continue
		}
		faults = append(faults, unsupportedFaults(res.Unsupported, o.File)...)
		if checks.warnings != nil {
			for _, w := range res.Warnings {
				*checks.warnings = append(*checks.warnings, Fault{File: o.File, Object: ref, Message: w,
					Ref: &corev1.ObjectReference{APIVersion: o.GetAPIVersion(), Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}})
			}
		}
	}
	if len(faults) == 0 {
		return nil
	}
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].File < faults[j].File })
	return &Error{Faults: faults}
}

// objectFaults are the faults of one object, declared in file: each
// compile fault with its field, or the error as it is.
func objectFaults(err error, file, ref string) []Fault {
	errs, ok := err.(fault.List)
	if !ok {
		return []Fault{{File: file, Object: ref, Message: err.Error()}}
	}
	faults := make([]Fault, 0, len(errs))
	for _, e := range errs {
		faults = append(faults, Fault{File: file, Object: fmt.Sprintf("%s %q", e.Kind, e.Name), Field: e.Field, Message: e.Fault})
	}
	return faults
}

// unsupportedFaults are the findings that stop a revision: features
// charter cannot run in the cluster, used by a rule that enforces.
// Policy admission would refuse the same policy; one that only audits is
// applied, and its status says Unsupported.
func unsupportedFaults(found unsupported.List, file string) []Fault {
	var faults []Fault
	for _, u := range found.In(unsupported.InCluster).Enforced() {
		faults = append(faults, Fault{
			File:    file,
			Object:  fmt.Sprintf("%s %q", u.Kind, u.Name),
			Field:   u.Field,
			Message: u.Fault(),
		})
	}
	return faults
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
