package gitsync

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/convert"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// conversionOf counts the revision's ClusterPolicies and Policies that
// convert cleanly to the CEL kinds, with engine/convert (pure: no
// cluster, no network), so a platform team sees its migration debt in the
// repository's status. nil when the revision holds none.
func conversionOf(objs []build.Object, revision string) *gitopsv1alpha1.ConversionStatus {
	out := &gitopsv1alpha1.ConversionStatus{Revision: revision}
	for _, o := range objs {
		group, _, _ := strings.Cut(o.GetAPIVersion(), "/")
		var p kyvernov1.PolicyInterface
		switch {
		case group != "kyverno.io":
			continue
		case o.GetKind() == "ClusterPolicy":
			p = &kyvernov1.ClusterPolicy{}
		case o.GetKind() == "Policy":
			p = &kyvernov1.Policy{}
		default:
			continue
		}
		out.Total++
		name := o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		reason := ""
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, p); err != nil {
			reason = "does not decode: " + err.Error()
		} else if r := convert.Convert(p); !r.Clean() {
			reason = r.Problems[0].String()
		}
		if reason == "" {
			out.Convertible++
			continue
		}
		if len(out.Unconvertible) < gitopsv1alpha1.MaxUnconvertibleListed {
			out.Unconvertible = append(out.Unconvertible, gitopsv1alpha1.UnconvertiblePolicy{Name: name, Reason: reason})
		}
	}
	if out.Total == 0 {
		return nil
	}
	return out
}
