// Package workload is what the admission benchmark sends and serves: Pods
// that pass or fail charter's Pod Security policies (switched to Enforce by
// policymix), each with the decision charter must reach, and the handlers
// that answer them.
package workload

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/hack/benchadmission/policymix"
)

// Snapshot compiles policies into the snapshot charter's admission server
// evaluates, and fails when any of them does not compile: a benchmark of
// a policy set that is only partly enforced would measure the wrong thing.
func Snapshot(policies []kyvernov1.PolicyInterface) (*policycache.Snapshot, error) {
	s, err := policycache.Build(policies, nil)
	if err != nil {
		return nil, err
	}
	if len(s.Errors) > 0 {
		return nil, fmt.Errorf("policies do not compile: %w", s.Errors)
	}
	return s, nil
}

// Fixed serves one snapshot for ever: the admission server's policy
// source without informers.
type Fixed struct{ S *policycache.Snapshot }

// Snapshot implements server.Snapshots.
func (f Fixed) Snapshot() *policycache.Snapshot { return f.S }

// SnapshotOf is policymix.Typed then Snapshot: the policies read from files,
// compiled into the snapshot charter's admission server evaluates.
func SnapshotOf(policies []*unstructured.Unstructured) (*policycache.Snapshot, error) {
	typed, err := policymix.Typed(policies)
	if err != nil {
		return nil, err
	}
	return Snapshot(typed)
}
