package check

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// Updates runs, before anything is applied, the check policy admission
// makes of an update (generate.CheckUpdate): a ClusterPolicy or Policy of
// the revision that is installed already may not change the immutable
// fields of a kept generate rule. Without it, the API server would refuse
// that policy in the middle of the apply, after the objects before it were
// written. live reads the installed policies (an uncached reader: only the
// policies of the revision with generate rules are read). It returns
// *Error naming the file, the policy and the rule, or the error of a read.
// Run it on a revision Objects accepted. Of the options, only AskAbout
// counts: an object it refuses is not compared with what is installed,
// which whoever may not write it must not learn.
func Updates(ctx context.Context, objs []build.Object, scheme *runtime.Scheme, live client.Reader, opts ...Option) error {
	var checks options
	for _, opt := range opts {
		opt(&checks)
	}
	var faults []Fault
	for _, o := range objs {
		if checks.askAbout != nil && !checks.askAbout(o) {
			continue
		}
		var old kyvernov1.PolicyInterface
		switch o.GroupVersionKind() {
		case kyvernov1.GroupVersion.WithKind("ClusterPolicy"):
			old = &kyvernov1.ClusterPolicy{}
		case kyvernov1.GroupVersion.WithKind("Policy"):
			old = &kyvernov1.Policy{}
		default:
			continue
		}
		typed, err := decode(scheme, o.GroupVersionKind(), o)
		if err != nil {
			faults = append(faults, Fault{File: o.File, Object: describe(o), Message: err.Error()})
			continue
		}
		cur, ok := typed.(kyvernov1.PolicyInterface)
		if !ok || !cur.GetSpec().HasGenerate() {
			continue
		}
		if err := live.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}, old); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("reading the installed %s to check the update: %w", describe(o), err)
		}
		// The error names each rule and its fields (spec.rules[i]).
		if _, err := generate.CheckUpdate(old.GetSpec().Rules, cur.GetSpec().Rules); err != nil {
			faults = append(faults, Fault{File: o.File, Object: describe(o), Message: err.Error()})
		}
	}
	if len(faults) == 0 {
		return nil
	}
	return &Error{Faults: faults}
}
