package policycheck

import (
	"context"
	"fmt"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/policyid"
)

// AdmissionCluster is a Cluster that also knows the identity serving
// policy admission, which reads the objects of synchronized generate
// rules (nil: nobody is asked).
type AdmissionCluster interface {
	Cluster
	AdmissionReader() *Writer
}

// syncReadVerbs are what Kyverno asks of its admission controller for a
// synchronized generate rule, in its order.
var syncReadVerbs = []string{"list", "get"}

// SyncReadFaults are the faults of a ClusterPolicy or Policy whose
// synchronized generate rules name a kind the identity serving admission
// (a) may not list and get, as Kyverno's policy validation finds them
// (pkg/validation/policy validateActions: for a rule with synchronize, a
// SubjectAccessReview of its admission controller's ServiceAccount per
// verb, before the background controller's): refused at the rule's
// generate (or cloneList kind, or foreach entry) field with "<user>
// requires permissions list,get for resource v1/ConfigMap in namespace
// team". What is asked, and what is not (a kind with variables, one the
// cluster does not serve), is as in WriteFaults. Unlike WriteFaults it
// asks of a namespaced Policy too, as Kyverno does: whoever writes a
// Policy's objects, admission is served by the one identity.
func SyncReadFaults(p kyvernov1.PolicyInterface, cluster Cluster, a *Writer) (fault.List, error) {
	ctx, cancel := context.WithTimeout(context.Background(), writerCheckTimeout)
	defer cancel()
	kind := kyvernov1.ClusterPolicyKind
	if p.IsNamespaced() {
		kind = kyvernov1.PolicyKind
	}
	var faults fault.List
	add := func(field, what string) {
		faults = append(faults, &fault.Fault{Kind: kind, Name: policyid.Key(p), Field: field, Fault: what})
	}
	for i, rule := range p.GetSpec().Rules {
		if g := rule.Generation; g != nil && g.Synchronize {
			if err := a.generateFaults(ctx, cluster, fmt.Sprintf("spec.rules[%d]", i), g, syncReadVerbs, add); err != nil {
				return nil, err
			}
		}
	}
	return faults, nil
}

// syncReadFaults is SyncReadFaults when the cluster knows who serves
// admission, nothing otherwise.
func syncReadFaults(p kyvernov1.PolicyInterface, cluster Cluster) (fault.List, error) {
	ac, ok := cluster.(AdmissionCluster)
	if !ok || ac.AdmissionReader() == nil {
		return nil, nil
	}
	return SyncReadFaults(p, cluster, ac.AdmissionReader())
}
