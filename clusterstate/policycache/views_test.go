package policycache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/engine/fault"
)

// loadInstalled reads testdata files into Installed, as an API server
// would hand the objects out: each with a UID and generation 1.
func loadInstalled(t *testing.T, files ...string) *Installed {
	t.Helper()
	in := &Installed{}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			raw, err := yaml.YAMLToJSON(doc)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			obj, err := versions.Decode(schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind), raw)
			if err != nil {
				t.Fatalf("%s: %s: %v", file, meta.Kind, err)
			}
			switch o := obj.(type) {
			case kyvernov1.PolicyInterface:
				o.SetUID(types.UID("uid-" + o.GetName()))
				o.SetGeneration(1)
				in.Policies = append(in.Policies, o)
			case *kyvernov2.PolicyException:
				o.UID, o.Generation = types.UID("uid-"+o.Name), 1
				in.Exceptions = append(in.Exceptions, o)
			case *policiesv1.PolicyException:
				o.UID, o.Generation = types.UID("uid-cel-"+o.Name), 1
				in.CELExceptions = append(in.CELExceptions, o)
			default:
				t.Fatalf("%s: unexpected %T", file, obj)
			}
		}
	}
	return in
}

// viewPolicies lists the IDs of a view's units, and of those its set
// serves.
func viewPolicies(v ControllerView) (units, served []string) {
	for _, u := range v.Units {
		units = append(units, u.ID())
	}
	for _, p := range v.Set.Policies() {
		served = append(served, p.ID())
	}
	return units, served
}

// faultNames lists the kind and name of each fault.
func faultNames(faults fault.List) []string {
	var out []string
	for _, f := range faults {
		if s := f.Kind + " " + f.Name; !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// TestSnapshotViews: one build compiles every installed policy once and
// assembles, beside the admission sets, the background controller's view
// (generate and mutate-existing policies, admission or not, with both
// groups' exceptions) and the background scan's (scanned policies by ID,
// with the kyverno.io exceptions that have spec.background and the
// policies.kyverno.io ones). Exceptions that do not compile show in the
// faults of each view that binds them.
func TestSnapshotViews(t *testing.T) {
	in := loadInstalled(t, "views.yaml", "views-exceptions.yaml")
	b, compiled := countingBuilder()
	s, stats := b.BuildInstalled(in)
	if !stats.Changed || !stats.AdmissionChanged {
		t.Fatalf("first build: %+v, want a changed admission", stats)
	}
	if got := compiled.take(); len(got) != len(in.Policies)+len(in.Exceptions) {
		t.Errorf("compiled %v: want each policy and kyverno.io exception once", got)
	}

	tests := []struct {
		view          string
		got           ControllerView
		units, served []string
		faults        []string
	}{
		{
			view:   "Background",
			got:    s.Background,
			units:  []string{"generate-admission-background", "GeneratingPolicy:gpol-background", "MutatingPolicy:mpol-background-only"},
			served: []string{"generate-admission-background", "GeneratingPolicy:gpol-background", "MutatingPolicy:mpol-background-only"},
			faults: []string{"PolicyException platform/admission-only", "PolicyException platform/cel"},
		},
		{
			view:   "Reports",
			got:    s.Reports,
			units:  []string{"ValidatingPolicy:vpol-admission-reports", "broken-reports-only", "validate-admission-reports", "validate-reports-only"},
			served: []string{"ValidatingPolicy:vpol-admission-reports", "validate-admission-reports", "validate-reports-only"},
			faults: []string{"ClusterPolicy broken-reports-only", "PolicyException platform/cel"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.view, func(t *testing.T) {
			units, served := viewPolicies(tt.got)
			if !slices.Equal(units, tt.units) || !slices.Equal(served, tt.served) {
				t.Errorf("units %v, served %v\nwant units %v, served %v", units, served, tt.units, tt.served)
			}
			if got := faultNames(tt.got.Errors); !slices.Equal(got, tt.faults) {
				t.Errorf("faults of %v, want of %v", got, tt.faults)
			}
		})
	}
	var admission []string
	for _, p := range s.Policies() {
		admission = append(admission, p.ID())
	}
	if want := []string{"generate-admission-background", "MutatingPolicy:mpol-background-only", "validate-admission-only", "validate-admission-reports", "ValidatingPolicy:vpol-admission-reports", "GeneratingPolicy:gpol-background"}; !slices.Equal(admission, want) {
		t.Errorf("admission serves %v, want %v", admission, want)
	}
	// Policy status reads every policy's unit, admission or not.
	if u, ok := s.Compiled("broken-reports-only"); !ok || len(u.Errors()) == 0 {
		t.Errorf("Compiled(broken-reports-only) = %v, %v: want its faults", u, ok)
	}
	if s.Installed != in {
		t.Error("the snapshot does not carry what it was built from")
	}

	// An edit of a policy admission does not serve is a new snapshot for
	// the controllers, not a new admission.
	edited := *in
	edited.Policies = slices.Clone(in.Policies)
	for i, p := range edited.Policies {
		if p.GetName() == "validate-reports-only" {
			edited.Policies[i] = edit(p, true, func(p kyvernov1.PolicyInterface) { p.GetSpec().Rules[0].Validation.Message = "edited" })
		}
	}
	next, stats := b.BuildInstalled(&edited)
	if got := compiled.take(); !slices.Equal(got, []string{"policy validate-reports-only"}) {
		t.Errorf("the edit compiled %v, want the edited policy only", got)
	}
	if !stats.Changed || stats.AdmissionChanged {
		t.Errorf("the edit: %+v, want a change of the controllers' views only", stats)
	}
	if next.Fail != s.Fail || next.Background.Set != s.Background.Set || next.Reports.Set == s.Reports.Set {
		t.Error("the edit did not keep the admission sets and the background view, or kept the reports view")
	}
	if p, ok := next.Reports.Set.Lookup("validate-reports-only"); !ok || p.Source().(metav1.Object).GetGeneration() != 2 {
		t.Errorf("the reports view serves %v, want the edited policy", fmt.Sprint(p))
	}
	if again, stats := b.BuildInstalled(&edited); again != next || stats.Changed {
		t.Errorf("an unchanged build gave a new snapshot (%+v)", stats)
	}
}
