// Package policycheck is the one check of a policy object that policy
// admission (/policyvalidate), the GitOps pre-apply check and the CLI
// share: for every kind charter serves, written in any served version and
// decoded to its hub type, it compiles the object as the controllers will
// run it, so what is admitted is what runs, and returns the faults
// (fault.List, each naming the field), the features charter
// cannot run, and the warnings Kyverno gives when it admits the object.
//
// It also holds the kind table (Kinds, Lookup): every kind charter serves,
// with its scope and role, from which the policy cache's informers, the
// cleanup source and the CLI's decoding take their kinds; and
// CleanupPolicy, the one compile of a cleanup policy, which the cleanup
// controller runs.
package policycheck

import (
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/globalcontext"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/cleanup"
	"github.com/charter-dev/charter/engine/cpol"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/unsupported"
)

// Result is what a valid object carries beyond its validity.
type Result struct {
	// Unsupported are the features of the object charter cannot run
	// somewhere (unsupported.Features); each caller decides, by
	// where it runs, which refuse.
	Unsupported unsupported.List
	// Warnings are the warnings Kyverno gives when it admits the object
	// (cpol.Warnings).
	Warnings []string
}

// Checked reports whether Object judges objects of obj's type: the hub
// types of the kind table.
func Checked(obj runtime.Object) bool {
	_, ok := kindOf(obj)
	return ok
}

// Object checks one object, given as its hub type (versions.Decode), by
// its kind's check in the kind table. The error is fault.List, each
// fault naming its field, when the object has faults (a GlobalContextEntry
// too). Objects of other types are not judged: Result{}, nil.
func Object(obj runtime.Object) (Result, error) {
	k, ok := kindOf(obj)
	if !ok {
		return Result{}, nil
	}
	return k.check(obj.(client.Object))
}

// checkPolicy compiles a policy of any kind alone, as the controllers will
// run it, and adds the faults only the cluster has (cpol.ClusterFaults).
func checkPolicy(obj client.Object) (Result, error) {
	p := obj.(kyvernov1.PolicyInterface)
	set, err := engine.Compile([]kyvernov1.PolicyInterface{p})
	if err := faultsOrNil(err); err != nil {
		return Result{}, err
	}
	if faults := cpol.ClusterFaults(p); len(faults) > 0 {
		return Result{}, faults
	}
	return Result{Unsupported: set.Unsupported(), Warnings: cpol.Warnings(p)}, nil
}

func checkException(obj client.Object) (Result, error) {
	_, err := engine.Compile(nil, engine.WithExceptions([]*kyvernov2.PolicyException{obj.(*kyvernov2.PolicyException)}))
	return Result{}, faultsOrNil(err)
}

func checkCELException(obj client.Object) (Result, error) {
	_, err := engine.Compile(nil, engine.WithCELExceptions([]*policiesv1.PolicyException{obj.(*policiesv1.PolicyException)}))
	return Result{}, faultsOrNil(err)
}

// checkCleanup compiles a ClusterCleanupPolicy, CleanupPolicy,
// DeletingPolicy or NamespacedDeletingPolicy as the cleanup controller
// compiles it (CleanupPolicy): the schedule admitted is the one that runs.
func checkCleanup(obj client.Object) (Result, error) {
	p := obj.(kyvernov2.CleanupPolicyInterface)
	if _, err := CleanupPolicy(p); err != nil {
		return Result{}, err
	}
	return Result{Unsupported: unsupported.Features(p)}, nil
}

// checkGlobalContext checks a GlobalContextEntry's spec as the
// globalcontext Store loads it (globalcontext.Check); each fault names its
// field, as a policy's do.
func checkGlobalContext(obj client.Object) (Result, error) {
	e := obj.(*kyvernov2alpha1.GlobalContextEntry)
	if faults := fault.Parse(kyvernov2alpha1.GlobalContextEntryKind, e.GetName(), globalcontext.Check(e.GetName(), &e.Spec)); len(faults) > 0 {
		return Result{}, faults
	}
	return Result{}, nil
}

// CleanupPolicy compiles a ClusterCleanupPolicy, CleanupPolicy,
// DeletingPolicy or NamespacedDeletingPolicy: its schedule parsed, its
// match and conditions checked. The cleanup controller runs what it
// returns, and Object admits what it accepts, so the two never disagree
// on a schedule.
func CleanupPolicy(p kyvernov2.CleanupPolicyInterface) (*cleanup.Policy, error) {
	return cleanup.Compile(p)
}

// faultsOrNil returns the compile faults, or nil when there are none.
func faultsOrNil(err error) error {
	if faults, ok := err.(fault.List); ok && len(faults) == 0 {
		return nil
	}
	return err
}
