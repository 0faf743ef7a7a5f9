package workload

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/hack/benchadmission/policymix"
	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// PodSecurityProfiles are the folders of a Pod Security policy set.
var PodSecurityProfiles = []string{"baseline", "restricted"}

// PodSecurityPairs reads the Pod Security set in its two forms, as the
// conformance corpus has it: every ValidatingPolicy
// <vpolDir>/<profile>/<name>/<name>.yaml and the ClusterPolicy of the same
// name in <cpolDir>/<profile>/<name>/<name>.yaml, for the baseline and
// restricted profiles. The ValidatingPolicies are switched to
// validationActions [Deny], the ClusterPolicies to Enforce (as
// EnforcedPolicies does); the files are not changed. Both lists are sorted
// by name and hold the same names: a ValidatingPolicy without its
// ClusterPolicy is an error, a ClusterPolicy without a translation is left
// out.
func PodSecurityPairs(cpolDir, vpolDir string) (cpols, vpols []kyvernov1.PolicyInterface, err error) {
	for _, profile := range PodSecurityProfiles {
		dirs, err := os.ReadDir(filepath.Join(vpolDir, profile))
		if err != nil {
			return nil, nil, err
		}
		for _, d := range dirs {
			if !d.IsDir() {
				continue
			}
			name := d.Name()
			vp, err := deniedValidatingPolicy(filepath.Join(vpolDir, profile, name, name+".yaml"))
			if err != nil {
				return nil, nil, err
			}
			cp, err := enforcedClusterPolicy(filepath.Join(cpolDir, profile, name, name+".yaml"))
			if err != nil {
				return nil, nil, fmt.Errorf("the ClusterPolicy of ValidatingPolicy %s: %w", vp.GetName(), err)
			}
			if cp.GetName() != vp.GetName() {
				return nil, nil, fmt.Errorf("ValidatingPolicy %s translates ClusterPolicy %s: the names differ", vp.GetName(), cp.GetName())
			}
			vpols, cpols = append(vpols, vp), append(cpols, cp)
		}
	}
	if len(vpols) == 0 {
		return nil, nil, fmt.Errorf("no ValidatingPolicy found under %s/{%s}/<name>/<name>.yaml", vpolDir, PodSecurityProfiles)
	}
	byName := func(ps []kyvernov1.PolicyInterface) {
		sort.Slice(ps, func(i, j int) bool { return ps[i].GetName() < ps[j].GetName() })
	}
	byName(cpols)
	byName(vpols)
	return cpols, vpols, nil
}

// deniedValidatingPolicy reads the one ValidatingPolicy of a file and sets
// its validationActions to [Deny].
func deniedValidatingPolicy(path string) (kyvernov1.PolicyInterface, error) {
	docs, err := manifest.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pf, err := manifest.DecodePolicies(docs)
	if err != nil {
		return nil, err
	}
	if len(pf.Policies) != 1 {
		return nil, fmt.Errorf("%s: %d policies, want one ValidatingPolicy", path, len(pf.Policies))
	}
	vp, ok := pf.Policies[0].(*policiesv1.ValidatingPolicy)
	if !ok {
		return nil, fmt.Errorf("%s: a %s, want a ValidatingPolicy", path, pf.Policies[0].GetKind())
	}
	vp.Spec.ValidationAction = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	return vp, nil
}

// enforcedClusterPolicy reads the ClusterPolicy of a file and switches it
// to Enforce.
func enforcedClusterPolicy(path string) (kyvernov1.PolicyInterface, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if u.GetKind() != "ClusterPolicy" {
		return nil, fmt.Errorf("%s: a %s, want a ClusterPolicy", path, u.GetKind())
	}
	if err := policymix.Enforce(u); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	typed, err := policymix.Typed([]*unstructured.Unstructured{u})
	if err != nil {
		return nil, err
	}
	return typed[0], nil
}
