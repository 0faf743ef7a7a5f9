package policycheck

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/wildcard"
)

// ServedKind is one resource the cluster serves: a kind in one group
// version, or one of its subresources.
type ServedKind struct {
	Group, Version, Kind string
	// Resource is the kind's resource (plural) name: "deployments".
	Resource string
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

// WriterCluster is a Cluster that also knows who carries out
// ClusterPolicies' generate and mutate-existing rules (nil: nobody is
// asked).
type WriterCluster interface {
	Cluster
	BackgroundWriter() *Writer
}

// DeleterCluster is a Cluster that also knows who carries out
// ClusterCleanupPolicies (nil: nobody is asked).
type DeleterCluster interface {
	Cluster
	CleanupDeleter() *Writer
}

// InCluster checks obj as Object does, then what only the cluster can
// tell: KindFaults for a ClusterPolicy or Policy, then SyncReadFaults when
// the cluster is an AdmissionCluster, and for a ClusterPolicy WriteFaults
// when the cluster is a WriterCluster; CleanupKindFaults for a
// CleanupPolicy; DeleteFaults for a ClusterCleanupPolicy when the cluster
// is a DeleterCluster. A nil cluster checks nothing more. A cluster that cannot
// answer is an error: a policy is not admitted unchecked.
func InCluster(obj runtime.Object, cluster Cluster) (Result, error) {
	res, err := Object(obj)
	if err != nil || cluster == nil {
		return res, err
	}
	var faults fault.List
	switch o := obj.(type) {
	case *kyvernov1.ClusterPolicy:
		faults, err = KindFaults(o, cluster)
		if err == nil && len(faults) == 0 {
			faults, err = syncReadFaults(o, cluster)
		}
		if wc, ok := cluster.(WriterCluster); ok && err == nil && len(faults) == 0 && wc.BackgroundWriter() != nil {
			faults, err = WriteFaults(o, cluster, wc.BackgroundWriter())
		}
	case *kyvernov1.Policy:
		faults, err = KindFaults(o, cluster)
		if err == nil && len(faults) == 0 {
			faults, err = syncReadFaults(o, cluster)
		}
	case *kyvernov2.CleanupPolicy:
		faults, err = CleanupKindFaults(o, cluster)
	case *kyvernov2.ClusterCleanupPolicy:
		if dc, ok := cluster.(DeleterCluster); ok && dc.CleanupDeleter() != nil {
			faults, err = DeleteFaults(o, cluster, dc.CleanupDeleter())
		}
	default:
		return res, nil
	}
	if err != nil {
		k, _ := kindOf(obj)
		return Result{}, fmt.Errorf("%s %q: asking the cluster for the kinds it serves: %w", k.Kind, obj.(client.Object).GetName(), err)
	}
	if len(faults) > 0 {
		return Result{}, faults
	}
	p, isPolicy := obj.(kyvernov1.PolicyInterface)
	if gc, ok := cluster.(GlobalContextCluster); ok && isPolicy && gc.GlobalContextEntries() != nil {
		res.Warnings = append(res.Warnings, GlobalContextWarnings(p, gc.GlobalContextEntries())...)
	}
	if rc, ok := cluster.(ReaderCluster); ok && isPolicy && rc.ReportsReader() != nil {
		// Only warnings hang on the answer: a cluster that cannot give it
		// does not stop the policy, and says so.
		warnings, err := ReadWarnings(p, cluster, rc.ReportsReader())
		if err != nil {
			warnings = []string{fmt.Sprintf("could not ask what %s may read: %v", rc.ReportsReader().User, err)}
		}
		res.Warnings = append(res.Warnings, warnings...)
	}
	if cc, ok := cluster.(CELTypeCluster); ok && isPolicy {
		warnings, err := cc.CELTypeWarnings(p)
		if err != nil {
			return Result{}, fmt.Errorf("%s %q: type-checking its CEL expressions: %w", p.GetKind(), policyid.Key(p), err)
		}
		res.Warnings = append(res.Warnings, warnings...)
	}
	return res, nil
}

// KindNotServed ends the fault of a kind the cluster does not serve.
const KindNotServed = "the cluster serves no such kind"

// KindFaults are the faults of a ClusterPolicy or Policy that Kyverno's
// policy validation finds by asking the cluster's discovery, each naming
// the kind's field:
//   - every kind a rule matches or excludes, "*" aside, must be served
//     (pkg/validation/policy validKinds: "unable to convert GVK to GVR for
//     kinds ...");
//   - a namespaced Policy may not name a cluster-scoped kind
//     (api/kyverno/v1 ResourceDescription.Validate: "Cluster wide resource
//     'Namespace' not allowed in namespaced policy"). The engine never
//     applies a namespaced policy to a cluster-scoped object either
//     (engine/scope.go); the refusal tells the tenant so when it writes it.
func KindFaults(p kyvernov1.PolicyInterface, cluster Cluster) (fault.List, error) {
	kind := kyvernov1.ClusterPolicyKind
	if p.IsNamespaced() {
		kind = kyvernov1.PolicyKind
	}
	var blocks []block
	for i, rule := range p.GetSpec().Rules {
		blocks = append(blocks, ruleBlocks(fmt.Sprintf("spec.rules[%d]", i), &rule.MatchResources, rule.ExcludeResources)...)
	}
	return blockFaults(kind, policyid.Key(p), p.IsNamespaced(), true, blocks, cluster)
}

// CleanupKindFaults are the faults of a CleanupPolicy that Kyverno's
// cleanup policy validation finds by asking discovery: it may not name a
// cluster-scoped kind (CleanupPolicySpec.Validate, "Cluster wide resource
// '<kind>' not allowed in namespaced policy"). Kyverno does not ask
// whether a cleanup policy's kinds are served; neither does this.
func CleanupKindFaults(p *kyvernov2.CleanupPolicy, cluster Cluster) (fault.List, error) {
	spec := p.GetSpec()
	blocks := []block{{"spec.match", spec.MatchResources.Any, spec.MatchResources.All, nil}}
	if spec.ExcludeResources != nil {
		blocks = append(blocks, block{"spec.exclude", spec.ExcludeResources.Any, spec.ExcludeResources.All, nil})
	}
	return blockFaults(kyvernov2.CleanupPolicyKind, p.Namespace+"/"+p.Name, true, false, blocks, cluster)
}

// ClusterWideInNamespaced is the fault of a namespaced policy naming a
// cluster-scoped kind, in Kyverno's words.
func ClusterWideInNamespaced(sel string) string {
	return fmt.Sprintf("Cluster wide resource '%s' not allowed in namespaced policy", sel)
}

// block is a match or exclude block with its field path: its any and all
// filters, and the older inline form's description (nil when the kind has
// none).
type block struct {
	path     string
	any, all kyvernov1.ResourceFilters
	inline   *kyvernov1.ResourceDescription
}

func ruleBlocks(path string, match *kyvernov1.MatchResources, exclude *kyvernov1.MatchResources) []block {
	out := []block{{path + ".match", match.Any, match.All, &match.ResourceDescription}}
	if exclude != nil {
		out = append(out, block{path + ".exclude", exclude.Any, exclude.All, &exclude.ResourceDescription})
	}
	return out
}

// blockFaults asks the cluster about every kind selector of the blocks:
// whether it is served (when served is true), and, for a namespaced
// policy, whether it names a cluster-scoped kind. As Kyverno, which looks
// the selector up as written among the cluster-scoped kinds ("Namespace",
// "v1/Namespace"), a selector with a wildcard or a subresource is not
// judged cluster-wide.
func blockFaults(kind, name string, namespaced, served bool, blocks []block, cluster Cluster) (fault.List, error) {
	var faults fault.List
	for _, b := range blocks {
		for _, d := range descriptions(b) {
			for k, sel := range d.kinds {
				if sel == "*" {
					continue
				}
				parsed := match.ParseKind(sel)
				found, err := cluster.Resolve(parsed)
				if err != nil {
					return nil, err
				}
				what := ""
				switch {
				case len(found) == 0 && served:
					what = fmt.Sprintf("unable to convert GVK to GVR for kinds %s: %s", sel, KindNotServed)
				case namespaced && parsed.SubResource == "" && !strings.ContainsAny(sel, "*?") && anyClusterScoped(found):
					what = ClusterWideInNamespaced(sel)
				}
				if what != "" {
					faults = append(faults, &fault.Fault{Kind: kind, Name: name, Field: fmt.Sprintf("%s.kinds[%d]", d.path, k), Fault: what})
				}
			}
		}
	}
	return faults, nil
}

func anyClusterScoped(kinds []ServedKind) bool {
	for _, k := range kinds {
		if k.Subresource == "" && !k.Namespaced {
			return true
		}
	}
	return false
}

// description is the kinds of one resource description of a block, with
// its field path.
type description struct {
	path  string
	kinds []string
	// names are the filter's names (not the deprecated name).
	names []string
}

// descriptions are the resource descriptions of a block: each any and all
// filter's, and the older inline form's.
func descriptions(b block) []description {
	var out []description
	for i, f := range b.any {
		out = append(out, description{fmt.Sprintf("%s.any[%d].resources", b.path, i), f.ResourceDescription.Kinds, f.ResourceDescription.Names})
	}
	for i, f := range b.all {
		out = append(out, description{fmt.Sprintf("%s.all[%d].resources", b.path, i), f.ResourceDescription.Kinds, f.ResourceDescription.Names})
	}
	if b.inline != nil {
		out = append(out, description{b.path + ".resources", b.inline.Kinds, b.inline.Names})
	}
	return out
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

	writer    *Writer
	admission *Writer
	deleter   *Writer
	reader    *Writer
	entries   GlobalContextEntries
	celTypes  bool
	schemas   *cachedSchemas

	mu    sync.Mutex
	kinds []ServedKind
	known bool
}

// NewDiscoveryCluster returns a Cluster asking client.
func NewDiscoveryCluster(client discovery.DiscoveryInterface) *DiscoveryCluster {
	return &DiscoveryCluster{client: client}
}

// WithBackgroundWriter makes d a WriterCluster: InCluster asks whether w
// may write what a ClusterPolicy's generate and mutate-existing rules
// name (WriteFaults).
func (d *DiscoveryCluster) WithBackgroundWriter(w *Writer) *DiscoveryCluster {
	d.writer = w
	return d
}

// BackgroundWriter implements WriterCluster.
func (d *DiscoveryCluster) BackgroundWriter() *Writer { return d.writer }

// WithAdmissionReader makes d an AdmissionCluster: InCluster asks whether
// a, the identity serving admission, may list and get what synchronized
// generate rules write (SyncReadFaults).
func (d *DiscoveryCluster) WithAdmissionReader(a *Writer) *DiscoveryCluster {
	d.admission = a
	return d
}

// AdmissionReader implements AdmissionCluster.
func (d *DiscoveryCluster) AdmissionReader() *Writer { return d.admission }

// WithCleanupDeleter makes d a DeleterCluster: InCluster asks whether w
// may delete and list what a ClusterCleanupPolicy matches (DeleteFaults).
func (d *DiscoveryCluster) WithCleanupDeleter(w *Writer) *DiscoveryCluster {
	d.deleter = w
	return d
}

// CleanupDeleter implements DeleterCluster.
func (d *DiscoveryCluster) CleanupDeleter() *Writer { return d.deleter }

// WithReportsReader makes d a ReaderCluster: InCluster warns of the kinds
// a ClusterPolicy's or Policy's validate and mutate rules match that w
// may not read (ReadWarnings).
func (d *DiscoveryCluster) WithReportsReader(w *Writer) *DiscoveryCluster {
	d.reader = w
	return d
}

// ReportsReader implements ReaderCluster.
func (d *DiscoveryCluster) ReportsReader() *Writer { return d.reader }

// WithGlobalContext makes d a GlobalContextCluster: InCluster warns of
// the GlobalContextEntries a ClusterPolicy's or Policy's rules read that
// entries does not hold Ready (GlobalContextWarnings).
func (d *DiscoveryCluster) WithGlobalContext(entries GlobalContextEntries) *DiscoveryCluster {
	d.entries = entries
	return d
}

// GlobalContextEntries implements GlobalContextCluster.
func (d *DiscoveryCluster) GlobalContextEntries() GlobalContextEntries { return d.entries }

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
				kinds = append(kinds, ServedKind{Group: gv.Group, Version: gv.Version, Kind: kind, Resource: parent, Subresource: sub, Namespaced: r.Namespaced})
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
