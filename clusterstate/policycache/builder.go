package policycache

import (
	"maps"
	"slices"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/webhookmatch"
)

// Builder builds Snapshots incrementally. It keeps the compiled unit
// (engine.CompiledPolicy, engine.CompiledException) of every object of the
// previous build and compiles again only the objects that changed since:
// a policy edit compiles that one policy, an exception edit compiles that
// one exception and re-binds the exceptions to the already compiled
// policies, and a build with nothing changed compiles nothing and returns
// the previous snapshot. The snapshot is then assembled from the units,
// which is an index rebuild, not a compile.
//
// Build gives the same snapshot as a fresh Builder would for the same
// inputs. A Builder is safe for concurrent use; the Cache calls it from
// one goroutine.
type Builder struct {
	compiler *engine.Compiler
	// compilePolicy and compileException compile one object; tests wrap
	// them to count compiles.
	compilePolicy       func(kyvernov1.PolicyInterface) *engine.CompiledPolicy
	compileException    func(*kyvernov2.PolicyException) *engine.CompiledException
	compileCELException func(*policiesv1.PolicyException) *engine.CompiledException

	mu sync.Mutex
	// policies and exceptions are the units of the last build, by
	// policyid.Of and by exception key.
	policies      map[string]*engine.CompiledPolicy
	exceptions    map[string]*engine.CompiledException
	celExceptions map[string]*engine.CompiledException
	// last is the last snapshot built, and the unit lists it was
	// assembled from.
	last                           *Snapshot
	lastFail, lastIgnore, lastFine []*engine.CompiledPolicy
	lastNamespaced                 map[string]*namespaceUnits
	lastExceptions                 []*engine.CompiledException
	lastBackground, lastReports    viewUnits
}

// namespaceUnits are the units of one namespace's namespaced policies,
// by failure policy.
type namespaceUnits struct {
	fail, ignore []*engine.CompiledPolicy
}

func sameNamespaceUnits(a, b map[string]*namespaceUnits) bool {
	if len(a) != len(b) {
		return false
	}
	for ns, ua := range a {
		ub, ok := b[ns]
		if !ok || !sameUnits(ua.fail, ub.fail) || !sameUnits(ua.ignore, ub.ignore) {
			return false
		}
	}
	return true
}

// BuildStats says what one Build did.
type BuildStats struct {
	// PoliciesCompiled and ExceptionsCompiled count the objects compiled
	// because they are new or changed; the Reused counts those served
	// from the previous build's units.
	PoliciesCompiled, PoliciesReused     int
	ExceptionsCompiled, ExceptionsReused int
	// Changed is false when the snapshot is the previous one: no object
	// was added, changed or removed.
	Changed bool
	// AdmissionChanged is true when the admission sets are new, false
	// when only what the controllers see changed (e.g. a policy with
	// spec.admission: false): the webhook configuration need not change.
	AdmissionChanged bool
}

// NewBuilder returns a Builder with no units yet: its first Build compiles
// everything. Its compile cache is its own: a policy compiled again (a
// change of its metadata, of an autogen status) reuses the parts that did
// not change.
func NewBuilder() *Builder {
	c := engine.NewCompiler(engine.WithCompileCache(engine.NewCompileCache()))
	return &Builder{compiler: c, compilePolicy: c.Policy, compileException: c.Exception,
		compileCELException: func(ex *policiesv1.PolicyException) *engine.CompiledException {
			// The cache hands over trusted exceptions only (see
			// ExceptionNamespaces): they act in any namespace.
			return c.CELException(ex, engine.ExceptionAnyNamespace)
		}}
}

// Build returns the snapshot of the installed policies: those that run at
// admission (spec.admission is not false) split by failure policy and the
// namespaced ones by namespace, with every exception bound to every set,
// and the controllers' views (Snapshot.Background, Snapshot.Reports).
// Every policy is compiled once, whichever sets it is in. Invalid
// admission policies and exceptions are left out and listed in
// Snapshot.Errors (a view lists its own); the rest still serve, so one bad
// policy never disarms the others. Policies and exceptions are ordered by
// key, so the result does not depend on informer order.
//
// A unit is reused while its object's UID, generation, labels and
// annotations are unchanged (objects without a generation, which never
// came from an API server, are compared by spec). Its Source may then
// differ from the object passed in by status and resourceVersion only.
func (b *Builder) Build(policies []kyvernov1.PolicyInterface, exceptions []*kyvernov2.PolicyException) (*Snapshot, BuildStats) {
	return b.BuildInstalled(&Installed{Policies: policies, Exceptions: exceptions})
}

// BuildInstalled is Build of the policies and both groups' exceptions of
// in. The policies.kyverno.io exceptions act in any namespace: pass only
// those of trusted namespaces (the Cache does).
func (b *Builder) BuildInstalled(in *Installed) (*Snapshot, BuildStats) {
	policies, exceptions := in.Policies, in.Exceptions
	b.mu.Lock()
	defer b.mu.Unlock()
	var stats BuildStats

	units := make(map[string]*engine.CompiledPolicy, len(policies))
	// fine are the policies with webhook matchConditions, each served
	// in a set of its own (Snapshot.FineGrained); namespaced the other
	// namespaced policies, by namespace (Snapshot.Namespaced).
	var fail, ignore, fine []*engine.CompiledPolicy
	namespaced := map[string]*namespaceUnits{}
	var background, reports viewUnits
	for _, p := range sortedPolicies(policies) {
		id := policyid.Of(p)
		u, ok := b.policies[id]
		if ok && sameObject(u.Source().(metav1.Object), p.(metav1.Object), u.Source().GetSpec(), p.GetSpec()) {
			stats.PoliciesReused++
		} else {
			u = b.compilePolicy(p)
			stats.PoliciesCompiled++
		}
		units[id] = u
		if HasBackgroundRules(p) {
			background.policies = append(background.policies, u)
		}
		if IsScanned(p) {
			reports.policies = append(reports.policies, u)
		}
		if !p.GetSpec().AdmissionProcessingEnabled() {
			continue
		}
		ignores := p.GetSpec().GetFailurePolicy() == kyvernov1.Ignore
		switch {
		case webhookmatch.Has(p):
			fine = append(fine, u)
		case p.IsNamespaced():
			ns := policyid.Namespace(p)
			nu := namespaced[ns]
			if nu == nil {
				nu = &namespaceUnits{}
				namespaced[ns] = nu
			}
			if ignores {
				nu.ignore = append(nu.ignore, u)
			} else {
				nu.fail = append(nu.fail, u)
			}
		case ignores:
			ignore = append(ignore, u)
		default:
			fail = append(fail, u)
		}
	}

	exUnits := make(map[string]*engine.CompiledException, len(exceptions))
	exList := make([]*engine.CompiledException, 0, len(exceptions))
	for _, ex := range sortedExceptions(exceptions) {
		key := exceptionKey(ex)
		u, ok := b.exceptions[key]
		if ok && sameObject(u.Source(), ex, &u.Source().Spec, &ex.Spec) {
			stats.ExceptionsReused++
		} else {
			u = b.compileException(ex)
			stats.ExceptionsCompiled++
		}
		exUnits[key] = u
		exList = append(exList, u)
		background.exceptions = append(background.exceptions, u)
		// Kyverno binds an exception with spec.background: false to
		// admission only (admission-reports.md §7): a scan reports the
		// resource's real result for it.
		if ex.Spec.BackgroundProcessingEnabled() {
			reports.exceptions = append(reports.exceptions, u)
		}
	}
	celUnits := make(map[string]*engine.CompiledException, len(in.CELExceptions))
	for _, ex := range sortedExceptions(in.CELExceptions) {
		key := exceptionKey(ex)
		u, ok := b.celExceptions[key]
		if ok && sameObject(u.CELSource(), ex, &u.CELSource().Spec, &ex.Spec) {
			stats.ExceptionsReused++
		} else {
			u = b.compileCELException(ex)
			stats.ExceptionsCompiled++
		}
		celUnits[key] = u
		exList = append(exList, u)
		background.exceptions = append(background.exceptions, u)
		reports.exceptions = append(reports.exceptions, u)
	}
	b.policies, b.exceptions, b.celExceptions = units, exUnits, celUnits
	reports.policies = byPolicyID(reports.policies)

	admissionSame := b.last != nil && sameUnits(fail, b.lastFail) && sameUnits(ignore, b.lastIgnore) && sameUnits(fine, b.lastFine) &&
		sameNamespaceUnits(namespaced, b.lastNamespaced) && sameUnits(exList, b.lastExceptions)
	backgroundSame := b.last != nil && background.same(b.lastBackground)
	reportsSame := b.last != nil && reports.same(b.lastReports)
	if admissionSame && backgroundSame && reportsSame && maps.Equal(units, b.last.units) {
		return b.last, stats
	}
	stats.Changed = true
	var s *Snapshot
	if admissionSame {
		// Only what the controllers see changed: the admission sets stay.
		last := *b.last
		s = &last
	} else {
		stats.AdmissionChanged = true
		s = b.assembleAdmission(fail, ignore, fine, namespaced, exList)
	}
	s.units, s.Installed, s.Generation = units, in, 0
	// A view whose units are the same is the same view: its controller
	// sees the same set.
	if backgroundSame {
		s.Background = b.last.Background
	} else {
		s.Background = b.assembleView(background)
	}
	if reportsSame {
		s.Reports = b.last.Reports
	} else {
		s.Reports = b.assembleView(reports)
	}
	b.last, b.lastFail, b.lastIgnore, b.lastFine, b.lastNamespaced, b.lastExceptions = s, fail, ignore, fine, namespaced, exList
	b.lastBackground, b.lastReports = background, reports
	return s, stats
}

// assembleAdmission builds the admission sets of a new snapshot from
// their units.
func (b *Builder) assembleAdmission(fail, ignore, fine []*engine.CompiledPolicy, namespaced map[string]*namespaceUnits, exList []*engine.CompiledException) *Snapshot {
	s := &Snapshot{}
	// The exceptions are bound to every set; their faults are reported
	// once.
	s.Fail = b.assemble(s, fail, exList, true)
	s.Ignore = b.assemble(s, ignore, exList, false)
	for _, ns := range slices.Sorted(maps.Keys(namespaced)) {
		if s.Namespaced == nil {
			s.Namespaced = make(map[string]NamespaceSets, len(namespaced))
		}
		nu := namespaced[ns]
		s.Namespaced[ns] = NamespaceSets{Fail: b.assemble(s, nu.fail, exList, false), Ignore: b.assemble(s, nu.ignore, exList, false)}
	}
	for _, u := range fine {
		if s.FineGrained == nil {
			s.FineGrained = make(map[string]FineGrainedSet, len(fine))
		}
		set := b.assemble(s, []*engine.CompiledPolicy{u}, exList, false)
		if len(set.Policies()) == 0 {
			// It did not compile (its faults are in s.Errors): no webhook
			// is written for it.
			continue
		}
		src := u.Source()
		s.FineGrained[policyid.FineGrainedKey(src)] = FineGrainedSet{Set: set, FailClosed: src.GetSpec().GetFailurePolicy() != kyvernov1.Ignore}
	}
	s.readsRoles = slices.ContainsFunc(s.Policies(), (*engine.Policy).ReadsRoles)
	return s
}

// assemble builds one set from units and appends its faults to s.Errors,
// leaving out the exceptions' faults unless withExceptions.
func (b *Builder) assemble(s *Snapshot, policies []*engine.CompiledPolicy, exceptions []*engine.CompiledException, withExceptions bool) *engine.PolicySet {
	set, err := b.compiler.Assemble(policies, exceptions)
	if faults, ok := err.(fault.List); ok {
		for _, f := range faults {
			if withExceptions || f.Kind != exceptionKind {
				s.Errors = append(s.Errors, f)
			}
		}
	}
	return set
}

const exceptionKind = "PolicyException"

// sameObject reports whether an object compiles as it did when the unit
// was compiled. The generation moves with every spec change, and a unit
// must be recompiled when it moves even if the spec reads the same: the
// policy status controller checks that the served policy is of the
// object's current generation.
func sameObject(old, cur metav1.Object, oldSpec, curSpec any) bool {
	if old == cur {
		return true
	}
	if old.GetUID() != cur.GetUID() ||
		!maps.Equal(old.GetLabels(), cur.GetLabels()) ||
		!maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) {
		return false
	}
	if old.GetGeneration() != 0 || cur.GetGeneration() != 0 {
		return old.GetGeneration() == cur.GetGeneration()
	}
	return equality.Semantic.DeepEqual(oldSpec, curSpec)
}

func sameUnits[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func exceptionKey(ex metav1.Object) string {
	if ns := ex.GetNamespace(); ns != "" {
		return ns + "/" + ex.GetName()
	}
	return ex.GetName()
}

func sortedExceptions[T metav1.Object](in []T) []T {
	out := append([]T(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return exceptionKey(out[i]) < exceptionKey(out[j]) })
	return out
}

// Compiled returns the compiled unit of one installed policy of the
// snapshot, admission or not, by policyid.Of (for a ClusterPolicy or
// Policy its key, "name" or "namespace/name"): its faults (Errors, empty
// when it compiles) and the object it was compiled from (Source, whose
// generation is the one the faults are of). It is false for a policy the
// snapshot does not know.
func (s *Snapshot) Compiled(id string) (*engine.CompiledPolicy, bool) {
	u, ok := s.units[id]
	return u, ok
}
