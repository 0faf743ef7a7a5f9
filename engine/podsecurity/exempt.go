package podsecurity

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/engine/wildcard"
)

// Exclude exempts one PSS control, as podSecurity.exclude[] in a rule.
type Exclude struct {
	// ControlName is the PSS control, e.g. "Capabilities".
	ControlName string
	// Images limits the exemption to containers whose image matches one of
	// these wildcard patterns; empty means the Pod-level fields.
	Images []string
	// RestrictedField limits the exemption to one field path, written with
	// [*] for list items, e.g. spec.containers[*].securityContext.capabilities.add.
	RestrictedField string
	// Values are the offending values that may stay (wildcards allowed);
	// every offending value of the field must match one. Empty means any.
	Values []string
}

// fieldFilter decides whether an exclusion covers an offending field.
type fieldFilter struct {
	field  string
	values []string
}

// covers reports whether the filter exempts the field at path holding the
// offending values bad.
func (f fieldFilter) covers(path string, bad ...string) bool {
	if f.field != "" && f.field != path {
		return false
	}
	if len(f.values) == 0 {
		return true
	}
	for _, b := range bad {
		if !matchesAny(f.values, b) {
			return false
		}
	}
	return true
}

func matchesAny(patterns []string, s string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return wildcard.Match(p, s) })
}

// container gives uniform access to containers, init containers and
// ephemeral containers.
type container struct {
	prefix string // "spec.containers[*]", ...
	common *corev1.Container
	// ephemeral points at the ephemeral container's fields when common is nil.
	ephemeral *corev1.EphemeralContainerCommon
}

func (c container) name() string {
	if c.common != nil {
		return c.common.Name
	}
	return c.ephemeral.Name
}

func (c container) image() string {
	if c.common != nil {
		return c.common.Image
	}
	return c.ephemeral.Image
}

func (c container) securityContext() **corev1.SecurityContext {
	if c.common != nil {
		return &c.common.SecurityContext
	}
	return &c.ephemeral.SecurityContext
}

func (c container) ports() []corev1.ContainerPort {
	if c.common != nil {
		return c.common.Ports
	}
	return c.ephemeral.Ports
}

func (c container) handlers() (probes map[string]*corev1.Probe, lifecycle *corev1.Lifecycle) {
	if c.common != nil {
		return map[string]*corev1.Probe{"livenessProbe": c.common.LivenessProbe, "readinessProbe": c.common.ReadinessProbe, "startupProbe": c.common.StartupProbe}, c.common.Lifecycle
	}
	return map[string]*corev1.Probe{"livenessProbe": c.ephemeral.LivenessProbe, "readinessProbe": c.ephemeral.ReadinessProbe, "startupProbe": c.ephemeral.StartupProbe}, c.ephemeral.Lifecycle
}

func containers(spec *corev1.PodSpec) []container {
	var out []container
	for i := range spec.Containers {
		out = append(out, container{prefix: "spec.containers[*]", common: &spec.Containers[i]})
	}
	for i := range spec.InitContainers {
		out = append(out, container{prefix: "spec.initContainers[*]", common: &spec.InitContainers[i]})
	}
	for i := range spec.EphemeralContainers {
		out = append(out, container{prefix: "spec.ephemeralContainers[*]", ephemeral: &spec.EphemeralContainers[i].EphemeralContainerCommon})
	}
	return out
}

// Values the baseline and restricted profiles allow.
var (
	baselineCapabilities = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
	seLinuxTypes         = []string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
	restrictedVolumes    = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)

const appArmorAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"

// exempt clears, in meta and spec (which the caller owns), the offending
// values of check id that exclusion e covers. Without images it works on
// the Pod-level fields, with images on the matching containers.
func exempt(id string, e Exclude, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	f := fieldFilter{field: e.RestrictedField, values: e.Values}
	if len(e.Images) == 0 {
		exemptPod(id, f, meta, spec)
		return
	}
	for _, c := range containers(spec) {
		if matchesAny(e.Images, c.image()) {
			exemptContainer(id, f, c, meta)
		}
	}
}

func podSecurityContext(spec *corev1.PodSpec) *corev1.PodSecurityContext {
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	return spec.SecurityContext
}

func exemptPod(id string, f fieldFilter, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	sc := spec.SecurityContext
	switch id {
	case "hostNamespaces":
		for path, flag := range map[string]*bool{"spec.hostNetwork": &spec.HostNetwork, "spec.hostPID": &spec.HostPID, "spec.hostIPC": &spec.HostIPC} {
			if *flag && f.covers(path, "true") {
				*flag = false
			}
		}
	case "hostPathVolumes":
		spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool {
			return v.HostPath != nil && f.covers("spec.volumes[*].hostPath", v.HostPath.Path)
		})
	case "restrictedVolumes":
		spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool {
			kind := volumeKind(v)
			if slices.Contains(restrictedVolumes, kind) {
				return false
			}
			return f.covers("spec.volumes[*]", kind) || f.covers("spec.volumes[*]."+kind)
		})
	case "sysctls":
		if sc != nil {
			sc.Sysctls = slices.DeleteFunc(sc.Sysctls, func(s corev1.Sysctl) bool {
				return f.covers("spec.securityContext.sysctls[*].name", s.Name)
			})
		}
	case "appArmorProfile":
		for key, value := range meta.Annotations {
			if strings.HasPrefix(key, appArmorAnnotationPrefix) && f.covers("metadata.annotations", value) {
				delete(meta.Annotations, key)
			}
		}
		if sc != nil && sc.AppArmorProfile != nil && f.covers("spec.securityContext.appArmorProfile.type", string(sc.AppArmorProfile.Type)) {
			sc.AppArmorProfile = nil
		}
	case "seccompProfile_baseline", "seccompProfile_restricted":
		// For restricted an unset Pod-level profile is what leaves
		// containers without one; setting it covers them too.
		var current string
		if sc != nil && sc.SeccompProfile != nil {
			current = string(sc.SeccompProfile.Type)
		}
		if f.covers("spec.securityContext.seccompProfile.type", nonEmpty(current)...) {
			podSecurityContext(spec).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}
	case "seLinuxOptions":
		if sc != nil {
			exemptSELinux(f, "spec.securityContext", sc.SELinuxOptions)
		}
	case "windowsHostProcess":
		if sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess &&
			f.covers("spec.securityContext.windowsOptions.hostProcess", "true") {
			sc.WindowsOptions.HostProcess = nil
		}
	case "runAsNonRoot":
		var bad []string
		if sc != nil && sc.RunAsNonRoot != nil {
			bad = []string{strconv.FormatBool(*sc.RunAsNonRoot)}
		}
		if f.covers("spec.securityContext.runAsNonRoot", bad...) {
			t := true
			podSecurityContext(spec).RunAsNonRoot = &t
		}
	case "runAsUser":
		if sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 && f.covers("spec.securityContext.runAsUser", "0") {
			sc.RunAsUser = nil
		}
	}
}

func exemptContainer(id string, f fieldFilter, c container, meta *metav1.ObjectMeta) {
	scp := c.securityContext()
	sc := *scp
	ensure := func() *corev1.SecurityContext {
		if *scp == nil {
			*scp = &corev1.SecurityContext{}
		}
		return *scp
	}
	path := c.prefix + ".securityContext."
	switch id {
	case "privileged":
		if sc != nil && sc.Privileged != nil && *sc.Privileged && f.covers(path+"privileged", "true") {
			sc.Privileged = nil
		}
	case "capabilities_baseline":
		if sc != nil && sc.Capabilities != nil {
			exemptAddedCapabilities(f, path+"capabilities.add", sc.Capabilities, baselineCapabilities)
		}
	case "capabilities_restricted":
		if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			var dropped []string
			if sc != nil && sc.Capabilities != nil {
				for _, d := range sc.Capabilities.Drop {
					dropped = append(dropped, string(d))
				}
			}
			if f.covers(path+"capabilities.drop", dropped...) {
				s := ensure()
				if s.Capabilities == nil {
					s.Capabilities = &corev1.Capabilities{}
				}
				s.Capabilities.Drop = append(s.Capabilities.Drop, "ALL")
			}
		}
		if s := *scp; s != nil && s.Capabilities != nil {
			exemptAddedCapabilities(f, path+"capabilities.add", s.Capabilities, []string{"NET_BIND_SERVICE"})
		}
	case "hostPorts":
		var bad []string
		for _, p := range c.ports() {
			if p.HostPort != 0 {
				bad = append(bad, strconv.Itoa(int(p.HostPort)))
			}
		}
		if len(bad) > 0 && f.covers(c.prefix+".ports[*].hostPort", bad...) {
			ports := c.ports()
			for i := range ports {
				ports[i].HostPort = 0
			}
		}
	case "hostProbesAndHostLifecycle":
		probes, lifecycle := c.handlers()
		for name, p := range probes {
			if p != nil {
				exemptHandlerHost(f, c.prefix+"."+name, &p.ProbeHandler.HTTPGet, &p.ProbeHandler.TCPSocket)
			}
		}
		if lifecycle != nil {
			for name, h := range map[string]*corev1.LifecycleHandler{"postStart": lifecycle.PostStart, "preStop": lifecycle.PreStop} {
				if h != nil {
					exemptHandlerHost(f, c.prefix+".lifecycle."+name, &h.HTTPGet, &h.TCPSocket)
				}
			}
		}
	case "procMount", "procMount_restricted":
		if sc != nil && sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount && f.covers(path+"procMount", string(*sc.ProcMount)) {
			sc.ProcMount = nil
		}
	case "seccompProfile_baseline", "seccompProfile_restricted":
		var current string
		if sc != nil && sc.SeccompProfile != nil {
			current = string(sc.SeccompProfile.Type)
		}
		if current != string(corev1.SeccompProfileTypeRuntimeDefault) && current != string(corev1.SeccompProfileTypeLocalhost) &&
			f.covers(path+"seccompProfile.type", nonEmpty(current)...) {
			ensure().SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}
	case "seLinuxOptions":
		if sc != nil {
			exemptSELinux(f, c.prefix+".securityContext", sc.SELinuxOptions)
		}
	case "windowsHostProcess":
		if sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess &&
			f.covers(path+"windowsOptions.hostProcess", "true") {
			sc.WindowsOptions.HostProcess = nil
		}
	case "allowPrivilegeEscalation":
		var bad []string
		if sc != nil && sc.AllowPrivilegeEscalation != nil {
			if !*sc.AllowPrivilegeEscalation {
				return
			}
			bad = []string{"true"}
		}
		if f.covers(path+"allowPrivilegeEscalation", bad...) {
			no := false
			ensure().AllowPrivilegeEscalation = &no
		}
	case "runAsNonRoot":
		var bad []string
		if sc != nil && sc.RunAsNonRoot != nil {
			if *sc.RunAsNonRoot {
				return
			}
			bad = []string{"false"}
		}
		if f.covers(path+"runAsNonRoot", bad...) {
			yes := true
			ensure().RunAsNonRoot = &yes
		}
	case "runAsUser":
		if sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 && f.covers(path+"runAsUser", "0") {
			sc.RunAsUser = nil
		}
	case "appArmorProfile":
		if sc != nil && sc.AppArmorProfile != nil && f.covers(path+"appArmorProfile.type", string(sc.AppArmorProfile.Type)) {
			sc.AppArmorProfile = nil
		}
		key := appArmorAnnotationPrefix + c.name()
		if value, ok := meta.Annotations[key]; ok && f.covers("metadata.annotations", value) {
			delete(meta.Annotations, key)
		}
	}
}

// exemptAddedCapabilities removes the added capabilities outside allowed,
// when the filter covers all of them.
func exemptAddedCapabilities(f fieldFilter, path string, caps *corev1.Capabilities, allowed []string) {
	var bad []string
	for _, c := range caps.Add {
		if !slices.Contains(allowed, string(c)) {
			bad = append(bad, string(c))
		}
	}
	if len(bad) > 0 && f.covers(path, bad...) {
		caps.Add = slices.DeleteFunc(caps.Add, func(c corev1.Capability) bool { return slices.Contains(bad, string(c)) })
	}
}

func exemptSELinux(f fieldFilter, prefix string, opts *corev1.SELinuxOptions) {
	if opts == nil {
		return
	}
	if !slices.Contains(seLinuxTypes, opts.Type) && f.covers(prefix+".seLinuxOptions.type", opts.Type) {
		opts.Type = ""
	}
	if opts.User != "" && f.covers(prefix+".seLinuxOptions.user", opts.User) {
		opts.User = ""
	}
	if opts.Role != "" && f.covers(prefix+".seLinuxOptions.role", opts.Role) {
		opts.Role = ""
	}
}

func exemptHandlerHost(f fieldFilter, prefix string, httpGet **corev1.HTTPGetAction, tcp **corev1.TCPSocketAction) {
	if h := *httpGet; h != nil && h.Host != "" && f.covers(prefix+".httpGet.host", h.Host) {
		h.Host = ""
	}
	if t := *tcp; t != nil && t.Host != "" && f.covers(prefix+".tcpSocket.host", t.Host) {
		t.Host = ""
	}
}

// volumeKind returns the JSON name of the source a volume uses, e.g.
// "hostPath".
func volumeKind(v corev1.Volume) string {
	data, err := json.Marshal(v.VolumeSource)
	if err != nil {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	for k := range m {
		return k
	}
	return ""
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
