package policycheck

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/wildcard"
)

// ServedKind is one resource the cluster serves: a kind in one group
// version, or one of its subresources.
type ServedKind struct {
	Group, Version, Kind string
	// Subresource is "" for the resource itself ("status", "scale",
	// "exec" for its subresources).
	Subresource string
	Namespaced  bool
}

// Cluster answers what Kyverno's policy validation asks the cluster: the
// kinds it serves. Policy admission asks the API server's discovery
// (DiscoveryCluster); the GitOps check adds the CustomResourceDefinitions
// of the revision it checks.
type Cluster interface {
	// Resolve returns the served resources a kind selector of a rule
	// names ("Pod", "apps/v1/Deployment", "batch/*/Job",
	// "Deployment/scale"); none when the cluster serves no such kind.
	Resolve(sel match.KindSelector) ([]ServedKind, error)
}

// InCluster checks obj as Object does, then, for a ClusterPolicy or
// Policy, what only the cluster can tell (KindFaults). A nil cluster
// checks nothing more. A cluster that cannot answer is an error: a
// policy is not admitted unchecked.
func InCluster(obj runtime.Object, cluster Cluster) (Result, error) {
	res, err := Object(obj)
	if err != nil || cluster == nil {
		return res, err
	}
	var p kyvernov1.PolicyInterface
	switch o := obj.(type) {
	case *kyvernov1.ClusterPolicy:
		p = o
	case *kyvernov1.Policy:
		p = o
	default:
		return res, nil
	}
	faults, err := KindFaults(p, cluster)
	if err != nil {
		return Result{}, fmt.Errorf("%s %q: asking the cluster for the kinds it serves: %w", p.GetKind(), engine.PolicyKey(p), err)
	}
	if len(faults) > 0 {
		return Result{}, faults
	}
	return res, nil
}

// KindNotServed ends the fault of a kind the cluster does not serve.
const KindNotServed = "the cluster serves no such kind"

// KindFaults are the faults of a ClusterPolicy or Policy that Kyverno's
// policy validation finds by asking the cluster's discovery
// (pkg/validation/policy validKinds): every kind a rule matches or
// excludes, "*" aside, must be served ("unable to convert GVK to GVR for
// kinds ..."). Each fault names the kind's field. (Kyverno also refuses a
// namespaced Policy that names a cluster-scoped kind, "Cluster wide
// resource ... not allowed in namespaced policy"; charter admits it and
// never applies it to cluster-scoped objects: docs/policy-validation.md.)
func KindFaults(p kyvernov1.PolicyInterface, cluster Cluster) (engine.CompileErrors, error) {
	var faults engine.CompileErrors
	kind := kyvernov1.ClusterPolicyKind
	if p.IsNamespaced() {
		kind = kyvernov1.PolicyKind
	}
	add := func(field, fault string) {
		faults = append(faults, &engine.CompileError{Kind: kind, Name: engine.PolicyKey(p), Field: field, Fault: fault})
	}
	for i, rule := range p.GetSpec().Rules {
		blocks := []struct {
			path string
			m    *kyvernov1.MatchResources
		}{{"match", &rule.MatchResources}, {"exclude", rule.ExcludeResources}}
		for _, b := range blocks {
			if b.m == nil {
				continue
			}
			for _, d := range descriptions(fmt.Sprintf("spec.rules[%d].%s", i, b.path), b.m) {
				for k, sel := range d.kinds {
					if sel == "*" {
						continue
					}
					served, err := cluster.Resolve(match.ParseKind(sel))
					if err != nil {
						return nil, err
					}
					field := fmt.Sprintf("%s.kinds[%d]", d.path, k)
					if len(served) == 0 {
						add(field, fmt.Sprintf("unable to convert GVK to GVR for kinds %s: %s", sel, KindNotServed))
					}
				}
			}
		}
	}
	return faults, nil
}

// description is the kinds of one resource description of a block, with
// its field path.
type description struct {
	path  string
	kinds []string
}

// descriptions are the resource descriptions of a match or exclude
// block: each any and all filter's, and the older inline form's.
func descriptions(path string, m *kyvernov1.MatchResources) []description {
	var out []description
	for i, f := range m.Any {
		out = append(out, description{fmt.Sprintf("%s.any[%d].resources", path, i), f.ResourceDescription.Kinds})
	}
	for i, f := range m.All {
		out = append(out, description{fmt.Sprintf("%s.all[%d].resources", path, i), f.ResourceDescription.Kinds})
	}
	return append(out, description{path + ".resources", m.ResourceDescription.Kinds})
}

// Matches reports whether a selector names k. Group and version "*" (or
// empty) match any; a selector without a subresource names the resource
// itself only.
func Matches(sel match.KindSelector, k ServedKind) bool {
	if !wildcard.Match(sel.Kind, k.Kind) ||
		(sel.Group != "" && !wildcard.Match(sel.Group, k.Group)) ||
		(sel.Version != "" && !wildcard.Match(sel.Version, k.Version)) {
		return false
	}
	if sel.SubResource == "" {
		return k.Subresource == ""
	}
	return wildcard.Match(sel.SubResource, k.Subresource)
}

// DiscoveryCluster is a Cluster that asks the API server's discovery for
// every group version it serves (not only the preferred ones: a rule may
// name any served version). The answer is kept, and asked again when a
// kind is not found in it, since CRDs come and go: a policy written just
// after its CRD is judged by the new answer.
type DiscoveryCluster struct {
	client discovery.DiscoveryInterface

	mu    sync.Mutex
	kinds []ServedKind
	known bool
}

// NewDiscoveryCluster returns a Cluster asking client.
func NewDiscoveryCluster(client discovery.DiscoveryInterface) *DiscoveryCluster {
	return &DiscoveryCluster{client: client}
}

// Resolve implements Cluster.
func (d *DiscoveryCluster) Resolve(sel match.KindSelector) ([]ServedKind, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.known {
		if found := resolveIn(d.kinds, sel); len(found) > 0 {
			return found, nil
		}
	}
	kinds, err := d.discover()
	if err != nil {
		return nil, err
	}
	d.kinds, d.known = kinds, true
	return resolveIn(kinds, sel), nil
}

// discover lists every served resource. A group whose discovery failed
// (an aggregated API that is down) is left out, as Kyverno leaves it out;
// any other failure is an error.
func (d *DiscoveryCluster) discover() ([]ServedKind, error) {
	_, lists, err := d.client.ServerGroupsAndResources()
	var failed *discovery.ErrGroupDiscoveryFailed
	if err != nil && !errors.As(err, &failed) {
		return nil, err
	}
	var kinds []ServedKind
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		// A subresource's Kind is its own (Scale); rules name it by its
		// parent's kind.
		parents := map[string]string{}
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				parents[r.Name] = r.Kind
			}
		}
		for _, r := range list.APIResources {
			parent, sub, _ := strings.Cut(r.Name, "/")
			if kind := parents[parent]; kind != "" {
				kinds = append(kinds, ServedKind{Group: gv.Group, Version: gv.Version, Kind: kind, Subresource: sub, Namespaced: r.Namespaced})
			}
		}
	}
	return kinds, nil
}

func resolveIn(kinds []ServedKind, sel match.KindSelector) []ServedKind {
	var out []ServedKind
	for _, k := range kinds {
		if Matches(sel, k) {
			out = append(out, k)
		}
	}
	return out
}
