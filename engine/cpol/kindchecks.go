package cpol

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/fault"
)

// This file holds the checks Kyverno makes when a kyverno.io
// PolicyException is written (pkg/validation/exception: the api/kyverno/v2
// Validate methods) that compiling it does not make as a side effect; a
// cleanup policy's are checkCleanupSpec's (cleanup.go).
// docs/policy-validation.md lists each with its test.

// checkExceptionSpec makes Kyverno's checks of a PolicyException's match
// and podSecurity (PolicyExceptionSpec.Validate): any and all are not
// given together; an exception applied in background scans (spec.background,
// true when absent) names no user information, since a scan has no
// request to take it from; subjects and roles are well formed; a
// resource filter names either name or names and a selector with
// requirements; each podSecurity entry is one Kyverno can apply.
func checkExceptionSpec(spec *kyvernov2.PolicyExceptionSpec, f *fault.Collector) {
	m := &spec.Match
	if len(m.Any) > 0 && len(m.All) > 0 {
		f.Add("spec.match", "can't specify any and all together")
	}
	for _, list := range []struct {
		name    string
		filters kyvernov1.ResourceFilters
	}{{"any", m.Any}, {"all", m.All}} {
		for i := range list.filters {
			p := fmt.Sprintf("spec.match.%s[%d]", list.name, i)
			if spec.BackgroundProcessingEnabled() {
				CheckNoUserInfo(&list.filters[i].UserInfo, p,
					"a PolicyException applied in background scans (spec.background, true when absent) has no request to take it from", f)
			}
			checkUserInfoEntries(&list.filters[i].UserInfo, p, f)
			d := &list.filters[i].ResourceDescription
			if d.Name != "" && len(d.Names) > 0 {
				f.Add(p+".resources", "both name and names can not be specified together")
			}
			CheckSelectorRequirements(d.Selector, p+".resources.selector", f)
		}
	}
	for i := range spec.PodSecurity {
		checkPodSecurityStandard(&spec.PodSecurity[i], fmt.Sprintf("spec.podSecurity[%d]", i), f)
	}
}

// CheckNoUserInfo refuses, at each field, user information where there is
// no request to take it from (api/kyverno/v1 UserInfo.ValidateNoUserInfo:
// "Usage of user info is forbidden"); why says where.
func CheckNoUserInfo(u *kyvernov1.UserInfo, path, why string, f *fault.Collector) {
	for _, field := range []struct {
		name string
		set  bool
	}{{"subjects", len(u.Subjects) > 0}, {"roles", len(u.Roles) > 0}, {"clusterRoles", len(u.ClusterRoles) > 0}} {
		if field.set {
			f.Add(path+"."+field.name, "Usage of user info is forbidden: "+why)
		}
	}
}

// CheckSelectorRequirements refuses a label selector that selects
// nothing in particular (api/kyverno/v1 ResourceDescription.Validate: "The
// requirements are not specified in selector"); one with a wildcard is
// matched as a pattern, not parsed.
func CheckSelectorRequirements(sel *metav1.LabelSelector, path string, f *fault.Collector) {
	if sel == nil || selectorHasWildcard(sel) {
		return
	}
	if s, err := metav1.LabelSelectorAsSelector(sel); err == nil {
		if reqs, _ := s.Requirements(); len(reqs) == 0 {
			f.Add(path, "the requirements are not specified in selector")
		}
	}
}

// checkPodSecurityStandard makes Kyverno's checks of one Pod Security
// control exempted (api/kyverno/v1 PodSecurityStandard.Validate): a
// container-level control names images, a pod-level one does not, and
// restrictedField and values come together.
func checkPodSecurityStandard(ps *kyvernov1.PodSecurityStandard, path string, f *fault.Collector) {
	switch {
	case slices.Contains(pssContainerControls, ps.ControlName) && len(ps.Images) == 0:
		f.Add(path+".controlName", fmt.Sprintf("%q: exclude.images must be specified for the container level control", ps.ControlName))
	case slices.Contains(pssPodLevelControls, ps.ControlName) && len(ps.Images) != 0:
		f.Add(path+".controlName", fmt.Sprintf("%q: exclude.images must not be specified for the pod level control", ps.ControlName))
	}
	if ps.RestrictedField != "" && len(ps.Values) == 0 {
		f.Add(path+".values", "values is required with restrictedField")
	}
	if ps.RestrictedField == "" && len(ps.Values) != 0 {
		f.Add(path+".restrictedField", "restrictedField is required with values")
	}
}
