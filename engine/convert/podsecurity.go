package convert

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// podSecurityVersion is the newest Pod Security Standards version charter's
// engine checks (k8s.io/pod-security-admission v0.37), which "latest"
// means. Older versions check differently (fewer sysctls, no user
// namespace relaxation) and are not written.
const podSecurityVersion = "v1.37"

// pssCheck is one Pod Security Standards check written in CEL. pod is
// its Pod-level part, containers its part for each container of the list
// given; exemptPod tells the Pod-level part it is exempt (an exclusion
// without images), which Kyverno applies by making the Pod-level fields
// compliant.
type pssCheck struct {
	control    string
	restricted bool
	// baselineOnly marks a baseline check the restricted level replaces
	// with a stricter one.
	baselineOnly bool
	// noImages marks a control whose exemption by image also reaches
	// the Pod's annotations, which the converter does not write.
	noImages bool
	message  string
	cel      func(containers string, exemptPod bool) expr
}

// The CEL of each check reads the Pod as k8s.io/pod-security-admission
// does: a missing field is the default the check allows.
const (
	podSC       = "object.spec.?securityContext"
	containerSC = "container.?securityContext"
)

var (
	baselineCapabilities  = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
	seLinuxTypes          = []string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
	safeSysctls           = []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}
	restrictedVolumeKinds = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret"}
	validSeccomp          = []string{"RuntimeDefault", "Localhost"}
)

func celList(values []string) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = str(v).s
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// everyContainer is containers.all(container, body); true when the body
// is, or when containers is "" (every container exempt).
func everyContainer(containers string, body expr) expr {
	if body.isTrue() || containers == "" {
		return celTrue
	}
	return macro(atom(containers), "all", "container", body)
}

// podPart is the Pod-level part of a check, true when it is exempt.
func podPart(exemptPod bool, e string) expr {
	if exemptPod {
		return celTrue
	}
	return atom("(" + e + ")")
}

// seccompAllowed: a seccompProfile, when set, is RuntimeDefault or Localhost.
func seccompAllowed(sc string) string {
	return "!" + sc + ".?seccompProfile.hasValue() || " + strings.TrimSuffix(sc, ".?securityContext") + ".securityContext.seccompProfile.?type.orValue('') in " + celList(validSeccomp)
}

func seLinuxAllowed(sc string) string {
	return sc + ".?seLinuxOptions.?type.orValue('') in " + celList(seLinuxTypes) +
		" && " + sc + ".?seLinuxOptions.?user.orValue('') == ''" +
		" && " + sc + ".?seLinuxOptions.?role.orValue('') == ''"
}

func appArmorAllowed(sc string) string {
	return "!" + sc + ".?appArmorProfile.hasValue() || " + strings.TrimSuffix(sc, ".?securityContext") + ".securityContext.appArmorProfile.?type.orValue('') in " + celList(validSeccomp)
}

func procMountDefault(containers string) expr {
	return everyContainer(containers, atom(containerSC+".?procMount.orValue('Default') == 'Default'"))
}

// pssChecks are the checks of the baseline and restricted levels at
// podSecurityVersion, in the order the engine reports them.
var pssChecks = []pssCheck{
	{control: "AppArmor", noImages: true, message: "AppArmor profiles other than RuntimeDefault and Localhost are not allowed",
		cel: func(c string, exemptPod bool) expr {
			pod := podPart(exemptPod, appArmorAllowed(podSC))
			annotations := podPart(exemptPod, "object.?metadata.?annotations.orValue({}).all(key, !key.startsWith('container.apparmor.security.beta.kubernetes.io/') || object.metadata.annotations[key] in ['', 'runtime/default'] || object.metadata.annotations[key].startsWith('localhost/'))")
			return and(pod, annotations, everyContainer(c, atom(appArmorAllowed(containerSC))))
		}},
	{control: "Capabilities", baselineOnly: true, message: "capabilities beyond the baseline set must not be added",
		cel: func(c string, _ bool) expr {
			return everyContainer(c, atom(containerSC+".?capabilities.?add.orValue([]).all(capability, capability in "+celList(baselineCapabilities)+")"))
		}},
	{control: "Host Namespaces", message: "sharing the host namespaces is not allowed",
		cel: func(_ string, exemptPod bool) expr {
			return podPart(exemptPod, "!object.spec.?hostNetwork.orValue(false) && !object.spec.?hostPID.orValue(false) && !object.spec.?hostIPC.orValue(false)")
		}},
	{control: "HostPath Volumes", baselineOnly: true, message: "hostPath volumes are not allowed",
		cel: func(_ string, exemptPod bool) expr {
			return podPart(exemptPod, "!object.spec.?volumes.orValue([]).exists(volume, has(volume.hostPath))")
		}},
	{control: "Host Ports", message: "host ports are not allowed",
		cel: func(c string, _ bool) expr {
			return everyContainer(c, atom("container.?ports.orValue([]).all(port, port.?hostPort.orValue(0) == 0)"))
		}},
	{control: "Host Probes", message: "probes and lifecycle handlers must not set a host",
		cel: func(c string, _ bool) expr {
			return everyContainer(c, atom("[container.?livenessProbe, container.?readinessProbe, container.?startupProbe, container.?lifecycle.?postStart, container.?lifecycle.?preStop].all(handler, handler.?httpGet.?host.orValue('') == '' && handler.?tcpSocket.?host.orValue('') == '')"))
		}},
	{control: "Privileged Containers", message: "privileged containers are not allowed",
		cel: func(c string, _ bool) expr {
			return everyContainer(c, atom("!"+containerSC+".?privileged.orValue(false)"))
		}},
	{control: "/proc Mount Type", baselineOnly: true, message: "procMount must be Default (unless the Pod uses a user namespace)",
		cel: func(c string, _ bool) expr {
			return or(atom("object.spec.?hostUsers.orValue(true) == false"), procMountDefault(c))
		}},
	{control: "SELinux", message: "SELinux options must not set a user, a role or a custom type",
		cel: func(c string, exemptPod bool) expr {
			return and(podPart(exemptPod, seLinuxAllowed(podSC)), everyContainer(c, atom(seLinuxAllowed(containerSC))))
		}},
	{control: "Seccomp", baselineOnly: true, message: "the Unconfined seccomp profile is not allowed",
		cel: func(c string, exemptPod bool) expr {
			return and(podPart(exemptPod, seccompAllowed(podSC)), everyContainer(c, atom("("+seccompAllowed(containerSC)+")")))
		}},
	{control: "Sysctls", message: "only safe sysctls are allowed",
		cel: func(_ string, exemptPod bool) expr {
			return podPart(exemptPod, podSC+".?sysctls.orValue([]).all(sysctl, sysctl.name in "+celList(safeSysctls)+")")
		}},
	{control: "HostProcess", message: "Windows HostProcess containers are not allowed",
		cel: func(c string, exemptPod bool) expr {
			return and(podPart(exemptPod, "!"+podSC+".?windowsOptions.?hostProcess.orValue(false)"),
				everyContainer(c, atom("!"+containerSC+".?windowsOptions.?hostProcess.orValue(false)")))
		}},
	{control: "Privilege Escalation", restricted: true, message: "allowPrivilegeEscalation must be false",
		cel: func(c string, _ bool) expr {
			return or(atom("object.spec.?os.?name.orValue('') == 'windows'"), everyContainer(c, atom(containerSC+".?allowPrivilegeEscalation.orValue(true) == false")))
		}},
	{control: "Capabilities", restricted: true, message: "containers must drop ALL capabilities and add only NET_BIND_SERVICE",
		cel: func(c string, _ bool) expr {
			return or(atom("object.spec.?os.?name.orValue('') == 'windows'"), everyContainer(c, atom("'ALL' in "+containerSC+".?capabilities.?drop.orValue([]) && "+containerSC+".?capabilities.?add.orValue([]).all(capability, capability == 'NET_BIND_SERVICE')")))
		}},
	{control: "/proc Mount Type", restricted: true, message: "procMount must be Default",
		cel: func(c string, _ bool) expr { return procMountDefault(c) }},
	{control: "Volume Types", restricted: true, message: "only configMap, csi, downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim, projected and secret volumes are allowed",
		cel: func(_ string, exemptPod bool) expr {
			return podPart(exemptPod, "object.spec.?volumes.orValue([]).all(volume, volume.exists(key, key in "+celList(restrictedVolumeKinds)+"))")
		}},
	{control: "Running as Non-root", restricted: true, message: "the Pod or every container must set runAsNonRoot to true (unless the Pod uses a user namespace)",
		cel: func(c string, exemptPod bool) expr {
			podSet := podSC + ".?runAsNonRoot.orValue(false)"
			if exemptPod {
				podSet = "true"
			}
			return or(atom("object.spec.?hostUsers.orValue(true) == false"),
				and(podPart(exemptPod, podSC+".?runAsNonRoot.orValue(true) != false"), everyContainer(c, atom(containerSC+".?runAsNonRoot.orValue("+podSet+") == true"))))
		}},
	{control: "Running as Non-root user", restricted: true, message: "runAsUser must not be 0 (unless the Pod uses a user namespace)",
		cel: func(c string, exemptPod bool) expr {
			return or(atom("object.spec.?hostUsers.orValue(true) == false"),
				and(podPart(exemptPod, podSC+".?runAsUser.orValue(1) != 0"), everyContainer(c, atom(containerSC+".?runAsUser.orValue(1) != 0"))))
		}},
	{control: "Seccomp", restricted: true, message: "the Pod or every container must set the RuntimeDefault or Localhost seccomp profile",
		cel: func(c string, exemptPod bool) expr {
			podSet := podSC + ".?seccompProfile.?type.orValue('') in " + celList(validSeccomp)
			if exemptPod {
				podSet = "true"
			}
			return or(atom("object.spec.?os.?name.orValue('') == 'windows'"),
				and(podPart(exemptPod, seccompAllowed(podSC)), everyContainer(c, atom(containerSC+".?seccompProfile.hasValue() ? container.securityContext.seccompProfile.?type.orValue('') in "+celList(validSeccomp)+" : "+podSet))))
		}},
}

// allContainers is the CEL variable of every container the checks visit.
var allContainers = admissionregistrationv1.Variable{
	Name:       "containers",
	Expression: "object.spec.containers + object.spec.?initContainers.orValue([]) + object.spec.?ephemeralContainers.orValue([])",
}

// podSecurity converts validate.podSecurity to one validation per Pod
// Security Standards control of the level, each exclusion applied as
// Kyverno applies it: without images the control's Pod-level fields are
// exempt, with images its fields in the containers whose image matches.
func podSecurity(ps *kyvernov1.PodSecurity, level string, out *convertedRule) error {
	switch ps.Version {
	case "", "latest", podSecurityVersion:
	default:
		return cannot("podSecurity version %s: the converter writes the checks of %s (latest) only", ps.Version, podSecurityVersion)
	}
	restricted := false
	switch level {
	case "baseline":
	case "restricted":
		restricted = true
	default:
		return cannot("podSecurity level %q: only baseline and restricted have checks to write", level)
	}
	exemptPod := map[string]bool{}
	exemptImages := map[string][]string{}
	for i, e := range ps.Exclude {
		if !slices.ContainsFunc(pssChecks, func(c pssCheck) bool { return c.control == e.ControlName }) {
			return cannot("podSecurity.exclude[%d]: control %q has no check here", i, e.ControlName)
		}
		if e.RestrictedField != "" || len(e.Values) > 0 {
			return cannot("podSecurity.exclude[%d]: restrictedField and values are not written yet", i)
		}
		if len(e.Images) == 0 {
			exemptPod[e.ControlName] = true
			continue
		}
		exemptImages[e.ControlName] = append(exemptImages[e.ControlName], e.Images...)
	}
	out.variables = append(out.variables, allContainers)
	for _, c := range pssChecks {
		if c.restricted && !restricted || c.baselineOnly && restricted {
			continue
		}
		containers := "variables." + allContainers.Name
		if images := exemptImages[c.control]; len(images) > 0 {
			if c.noImages {
				return cannot("podSecurity.exclude of %s by images: the container's annotations are exempt too, which the converter does not write", c.control)
			}
			var matches []expr
			for _, img := range images {
				matches = append(matches, imageMatches(img))
			}
			if exempt := or(matches...); exempt.isTrue() {
				containers = ""
			} else {
				containers = macro(atom(containers), "filter", "container", not(exempt)).s
			}
		}
		check := c.cel(containers, exemptPod[c.control])
		if check.isTrue() {
			continue
		}
		out.validations = append(out.validations, admissionregistrationv1.Validation{
			Expression: layout(check.s),
			Message:    fmt.Sprintf("PodSecurity %q, %s: %s", level+":latest", c.control, c.message),
		})
	}
	return nil
}

// imageMatches is the CEL test of a container's image against a wildcard
// pattern of an exclusion.
func imageMatches(pattern string) expr {
	if !strings.ContainsAny(pattern, "*?") {
		return rel(atom("container.image"), "==", str(pattern))
	}
	if pattern == "*" {
		return celTrue
	}
	if strings.Count(pattern, "*") == 1 && strings.HasSuffix(pattern, "*") && !strings.Contains(pattern, "?") {
		return call(atom("container.image"), "startsWith", str(strings.TrimSuffix(pattern, "*")))
	}
	return call(atom("container.image"), "matches", str(globRegexp(pattern)))
}
