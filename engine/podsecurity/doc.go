// Package podsecurity evaluates the validate.podSecurity sub-rule: a Pod
// Security Standards profile (level baseline, restricted or privileged, at a
// version "latest" or "v1.x") applied with the checks of
// k8s.io/pod-security-admission, minus the rule's exclusions.
//
// An exclusion names a PSS control ("Capabilities", "Seccomp", ...). Without
// images it exempts the control's Pod-level fields (spec.hostNetwork,
// spec.securityContext.*, spec.volumes, metadata annotations); with images
// it exempts the control's container-level fields in the containers,
// init containers and ephemeral containers whose image matches one of the
// wildcard patterns. restrictedField narrows it to one field path as Kyverno
// writes it (spec.containers[*].securityContext.capabilities.add) and
// values to the offending values that may stay (all of them must match).
//
// charter applies an exclusion by clearing the exempted offending values in a
// copy of the Pod and running the control's check again: a check that then
// passes is dropped, one that still fails is reported with what remains.
package podsecurity
