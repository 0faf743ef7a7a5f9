package podsecurity

import (
	"fmt"
	"slices"
	"sync"

	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// check is one Pod Security check at the version a profile uses.
type check struct {
	id string
	fn policy.CheckPodFn
}

// profileChecks returns the checks of a level at a version, in the order
// the Pod Security admission evaluator runs them (baseline checks by ID,
// then restricted checks by ID), each at its newest revision not newer than
// the version, without the baseline checks a restricted check overrides.
// The evaluator itself (policy.NewEvaluator) returns results without check
// IDs, which exclusions and reports need, hence this mirror of its
// selection; the tests hold the two to the same results.
func profileChecks(lv api.LevelVersion) []check {
	if lv.Level == api.LevelPrivileged {
		return nil
	}
	registry := defaultRegistry()
	version := lv.Version
	if version.Latest() || registry.maxVersion.Older(version) {
		version = registry.maxVersion
	}
	key := profileKey{lv.Level, version}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if cached, ok := registry.profiles[key]; ok {
		return cached
	}
	var baseline, restricted []check
	overridden := map[policy.CheckID]bool{}
	for _, c := range registry.checks {
		if lv.Level == api.LevelBaseline && c.Level != api.LevelBaseline {
			continue
		}
		var chosen *policy.VersionedCheck
		for i := range c.Versions {
			if !version.Older(c.Versions[i].MinimumVersion) {
				chosen = &c.Versions[i]
			}
		}
		if chosen == nil {
			continue
		}
		sel := check{id: string(c.ID), fn: chosen.CheckPod}
		if c.Level == api.LevelRestricted {
			restricted = append(restricted, sel)
			for _, o := range chosen.OverrideCheckIDs {
				overridden[o] = true
			}
		} else {
			baseline = append(baseline, sel)
		}
	}
	baseline = slices.DeleteFunc(baseline, func(c check) bool { return overridden[policy.CheckID(c.id)] })
	byID := func(a, b check) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	}
	slices.SortFunc(baseline, byID)
	slices.SortFunc(restricted, byID)
	out := append(baseline, restricted...)
	registry.profiles[key] = out
	return out
}

type profileKey struct {
	level   api.Level
	version api.Version
}

type registry struct {
	checks     []policy.Check
	maxVersion api.Version

	mu       sync.Mutex
	profiles map[profileKey][]check
}

var defaultRegistry = sync.OnceValue(func() *registry {
	r := &registry{checks: policy.DefaultChecks(), profiles: map[profileKey][]check{}}
	for _, c := range r.checks {
		if last := c.Versions[len(c.Versions)-1].MinimumVersion; r.maxVersion.Older(last) {
			r.maxVersion = last
		}
	}
	return r
})

// checkByID returns the check with the given ID in a profile.
func checkByID(checks []check, id string) (check, bool) {
	for _, c := range checks {
		if c.id == id {
			return c, true
		}
	}
	return check{}, false
}

// ParseLevelVersion turns a rule's level and version into the PSA form.
// An empty version or "latest" is the latest version; otherwise "v1.x".
func ParseLevelVersion(level, version string) (api.LevelVersion, error) {
	l, err := api.ParseLevel(level)
	if err != nil {
		return api.LevelVersion{}, fmt.Errorf("podSecurity.level: %w", err)
	}
	if version == "" || version == "latest" {
		return api.LevelVersion{Level: l, Version: api.LatestVersion()}, nil
	}
	v, err := api.ParseVersion(version)
	if err != nil {
		return api.LevelVersion{}, fmt.Errorf("podSecurity.version: %w", err)
	}
	return api.LevelVersion{Level: l, Version: api.MajorMinorVersion(v.Major(), v.Minor())}, nil
}
