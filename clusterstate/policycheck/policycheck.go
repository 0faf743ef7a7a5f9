// Package policycheck is the one check of a policy object that policy
// admission (/policyvalidate), the GitOps pre-apply check and the CLI
// share: for every kind charter serves, written in any served version and
// decoded to its hub type, it compiles the object as the controllers will
// run it, so what is admitted is what runs, and returns the faults
// (engine.CompileErrors, each naming the field), the features charter
// cannot run, and the warnings Kyverno gives when it admits the object.
//
// It also holds the kind table (Kinds, Lookup): every kind charter serves,
// with its scope and role, from which the policy cache's informers, the
// cleanup source and the CLI's decoding take their kinds; and
// CleanupPolicy, the one compile of a cleanup policy, which the cleanup
// controller runs.
package policycheck

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/globalcontext"
	"github.com/charter-dev/charter/engine"
)

// Result is what a valid object carries beyond its validity.
type Result struct {
	// Unsupported are the features of the object charter cannot run
	// somewhere (engine.UnsupportedFeatures); each caller decides, by
	// where it runs, which refuse.
	Unsupported engine.UnsupportedList
	// Warnings are the warnings Kyverno gives when it admits the object
	// (engine.PolicyWarnings).
	Warnings []string
}

// Checked reports whether Object judges objects of obj's type.
func Checked(obj runtime.Object) bool {
	switch obj.(type) {
	case kyvernov1.PolicyInterface, kyvernov2.CleanupPolicyInterface,
		*kyvernov2.PolicyException, *policiesv1.PolicyException, *kyvernov2alpha1.GlobalContextEntry:
		return true
	}
	return false
}

// Object checks one object, given as its hub type (versions.Decode). The
// error is engine.CompileErrors when the object compiles to faults, a
// plain error naming the object otherwise (a GlobalContextEntry). Objects
// of other types are not judged: Result{}, nil.
func Object(obj runtime.Object) (Result, error) {
	switch o := obj.(type) {
	case kyvernov2.CleanupPolicyInterface:
		// ClusterCleanupPolicy, CleanupPolicy, DeletingPolicy and
		// NamespacedDeletingPolicy, compiled as the cleanup controller
		// compiles them: the schedule admitted is the one that runs.
		if _, err := CleanupPolicy(o); err != nil {
			return Result{}, err
		}
		return Result{Unsupported: engine.UnsupportedFeatures(o)}, nil
	case kyvernov1.PolicyInterface:
		set, err := engine.Compile([]kyvernov1.PolicyInterface{o})
		if err := faultsOrNil(err); err != nil {
			return Result{}, err
		}
		if faults := engine.ClusterFaults(o); len(faults) > 0 {
			return Result{}, faults
		}
		return Result{Unsupported: set.Unsupported(), Warnings: engine.PolicyWarnings(o)}, nil
	case *kyvernov2.PolicyException:
		_, err := engine.Compile(nil, engine.WithExceptions([]*kyvernov2.PolicyException{o}))
		return Result{}, faultsOrNil(err)
	case *policiesv1.PolicyException:
		_, err := engine.Compile(nil, engine.WithCELExceptions([]*policiesv1.PolicyException{o}))
		return Result{}, faultsOrNil(err)
	case *kyvernov2alpha1.GlobalContextEntry:
		if faults := globalcontext.Check(&o.Spec); len(faults) > 0 {
			return Result{}, fmt.Errorf("%s %q: %s", kyvernov2alpha1.GlobalContextEntryKind, o.GetName(), strings.Join(faults, "; "))
		}
	}
	return Result{}, nil
}

// CleanupPolicy compiles a ClusterCleanupPolicy, CleanupPolicy,
// DeletingPolicy or NamespacedDeletingPolicy: its schedule parsed, its
// match and conditions checked. The cleanup controller runs what it
// returns, and Object admits what it accepts, so the two never disagree
// on a schedule.
func CleanupPolicy(p kyvernov2.CleanupPolicyInterface) (*engine.CleanupPolicy, error) {
	return engine.CompileCleanupPolicy(p)
}

// faultsOrNil returns the compile faults, or nil when there are none.
func faultsOrNil(err error) error {
	if faults, ok := err.(engine.CompileErrors); ok && len(faults) == 0 {
		return nil
	}
	return err
}
