// Package cleanuppolicies is the process's source of CleanupPolicies,
// ClusterCleanupPolicies, DeletingPolicies and NamespacedDeletingPolicies:
// reads and change notifications on the manager's
// shared informers, so the cleanup controller and any other reader watch
// them once.
package cleanuppolicies

import (
	"context"
	"fmt"
	"maps"
	"strings"

	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/policycheck"
)

// Key names a cleanup policy: Namespace is empty for a
// ClusterCleanupPolicy and a DeletingPolicy. Kind is empty for the
// kyverno.io kinds (told apart by Namespace) and names the
// policies.kyverno.io ones.
type Key struct {
	Kind, Namespace, Name string
}

func (k Key) String() string {
	if k.Kind != "" {
		return strings.Trim(k.Kind+"/"+k.Namespace+"/"+k.Name, "/")
	}
	if k.Namespace == "" {
		return kyvernov2.ClusterCleanupPolicyKind + "/" + k.Name
	}
	return kyvernov2.CleanupPolicyKind + "/" + k.Namespace + "/" + k.Name
}

// Source reads cleanup policies from the process's shared informers.
type Source struct {
	cache crcache.Cache
}

// New returns a Source on the informers of cache.
func New(cache crcache.Cache) *Source { return &Source{cache: cache} }

// Get returns the policy, or a NotFound error.
func (s *Source) Get(ctx context.Context, k Key) (kyvernov2.CleanupPolicyInterface, error) {
	var p interface {
		client.Object
		kyvernov2.CleanupPolicyInterface
	} = &kyvernov2.ClusterCleanupPolicy{}
	switch {
	case k.Kind == policiesv1.DeletingPolicyKind:
		p = &policiesv1.DeletingPolicy{}
	case k.Kind == policiesv1.NamespacedDeletingPolicyKind:
		p = &policiesv1.NamespacedDeletingPolicy{}
	case k.Namespace != "":
		p = &kyvernov2.CleanupPolicy{}
	}
	if err := s.cache.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: k.Name}, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Watch calls changed with the key of every policy added, deleted, or
// updated in its spec (generation) or annotations (dry run); status
// writes do not count.
// It returns a function that stops the notifications.
func (s *Source) Watch(ctx context.Context, changed func(Key)) (func(), error) {
	var regs []func()
	for _, k := range policycheck.Kinds(policycheck.RoleCleanup) {
		obj := k.New()
		inf, err := s.cache.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("watching %T: %w", obj, err)
		}
		kind := ""
		if dp, ok := obj.(policiesv1.DeletingPolicyLike); ok {
			kind = dp.GetKind()
		}
		key := func(o any) (Key, bool) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			co, ok := o.(client.Object)
			if !ok {
				return Key{}, false
			}
			return Key{Kind: kind, Namespace: co.GetNamespace(), Name: co.GetName()}, true
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				if k, ok := key(o); ok {
					changed(k)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, ok1 := oldObj.(client.Object)
				n, ok2 := newObj.(client.Object)
				if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && maps.Equal(o.GetAnnotations(), n.GetAnnotations()) {
					return
				}
				if k, ok := key(newObj); ok {
					changed(k)
				}
			},
			DeleteFunc: func(o any) {
				if k, ok := key(o); ok {
					changed(k)
				}
			},
		})
		if err != nil {
			return nil, err
		}
		regs = append(regs, func() { _ = inf.RemoveEventHandler(reg) })
	}
	return func() {
		for _, r := range regs {
			r()
		}
	}, nil
}
