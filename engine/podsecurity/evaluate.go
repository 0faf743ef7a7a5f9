package podsecurity

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
)

// Check is a Pod Security check the Pod fails.
type Check struct {
	// ID is the Pod Security admission check ID, e.g. "allowPrivilegeEscalation".
	ID string
	// Control is the PSS control name, e.g. "Privilege Escalation".
	Control string
	// Reason is the check's forbidden reason, e.g. "allowPrivilegeEscalation != false".
	Reason string
	// Detail names the offending containers or values.
	Detail string
	// Images are the images of the containers whose own fields fail the
	// check; empty when only Pod-level fields do.
	Images []string
}

// Result is the outcome of a podSecurity evaluation.
type Result struct {
	// Level and Version are the profile as the rule wrote it.
	Level, Version string
	// Checks are the checks that still fail after the exclusions, in the
	// order the Pod Security admission evaluator runs them.
	Checks []Check
}

// Allowed reports whether the Pod passes the profile.
func (r Result) Allowed() bool { return len(r.Checks) == 0 }

// Message is the rule message Kyverno reports for the result:
// "Validation rule '<rule>' passed." or "Validation rule '<rule>' failed.
// It violates PodSecurity "<level>:<version>": (Forbidden reason: <reason>,
// field error list: [<detail>])..." with one parenthesised part per failed
// check.
func (r Result) Message(rule string) string {
	if r.Allowed() {
		return fmt.Sprintf("Validation rule '%s' passed.", rule)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Validation rule '%s' failed. It violates PodSecurity \"%s:%s\": ", rule, r.Level, r.Version)
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "(Forbidden reason: %s, field error list: [%s])", c.Reason, c.Detail)
	}
	return b.String()
}

// Evaluate applies the profile (level baseline|restricted|privileged,
// version "latest", "" or "v1.x") to a Pod's metadata and spec, minus the
// exclusions. It errors on an unknown level or version, or an exclusion
// naming an unknown control. meta and spec are not modified.
func Evaluate(meta metav1.ObjectMeta, spec *corev1.PodSpec, level, version string, excludes []Exclude) (Result, error) {
	lv, err := ParseLevelVersion(level, version)
	if err != nil {
		return Result{}, err
	}
	for i, e := range excludes {
		if !KnownControl(e.ControlName) {
			return Result{}, fmt.Errorf("podSecurity.exclude[%d].controlName: unknown control %q", i, e.ControlName)
		}
	}
	if version == "" {
		version = "latest"
	}
	result := Result{Level: level, Version: version}
	if spec == nil {
		spec = &corev1.PodSpec{}
	}
	checks := profileChecks(lv)
	for _, c := range checks {
		r := c.fn(&meta, spec)
		if r.Allowed {
			continue
		}
		var applicable []Exclude
		for _, e := range excludes {
			if controlCovers(e.ControlName, c.id) {
				applicable = append(applicable, e)
			}
		}
		if len(applicable) > 0 {
			m, s := meta.DeepCopy(), spec.DeepCopy()
			for _, e := range applicable {
				exempt(c.id, e, m, s)
			}
			if r = c.fn(m, s); r.Allowed {
				continue
			}
			result.Checks = append(result.Checks, failed(c, r.ForbiddenReason, r.ForbiddenDetail, m, s))
			continue
		}
		result.Checks = append(result.Checks, failed(c, r.ForbiddenReason, r.ForbiddenDetail, &meta, spec))
	}
	return result, nil
}

func failed(c check, reason, detail string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) Check {
	return Check{
		ID:      c.id,
		Control: ControlName(c.id),
		Reason:  reason,
		Detail:  detail,
		Images:  offendingImages(c, meta, spec),
	}
}

// offendingImages lists the images of the containers that fail the check
// on their own: with the Pod-level fields of the check cleared and only
// that container in the Pod.
func offendingImages(c check, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []string {
	podLevel := spec.DeepCopy()
	m := meta.DeepCopy()
	exempt(c.id, Exclude{}, m, podLevel)
	var images []string
	try := func(s *corev1.PodSpec, image string) {
		if !c.fn(m, s).Allowed && !slices.Contains(images, image) {
			images = append(images, image)
		}
	}
	for i := range podLevel.Containers {
		s := *podLevel
		s.Containers, s.InitContainers, s.EphemeralContainers = podLevel.Containers[i:i+1], nil, nil
		try(&s, podLevel.Containers[i].Image)
	}
	for i := range podLevel.InitContainers {
		s := *podLevel
		s.Containers, s.InitContainers, s.EphemeralContainers = nil, podLevel.InitContainers[i:i+1], nil
		try(&s, podLevel.InitContainers[i].Image)
	}
	for i := range podLevel.EphemeralContainers {
		s := *podLevel
		s.Containers, s.InitContainers, s.EphemeralContainers = nil, nil, podLevel.EphemeralContainers[i:i+1]
		try(&s, podLevel.EphemeralContainers[i].Image)
	}
	return images
}

// Levels accepted in a rule.
var Levels = []string{string(api.LevelPrivileged), string(api.LevelBaseline), string(api.LevelRestricted)}
