package podsecurity

// Control names (as written in podSecurity.exclude[].controlName) and the
// Pod Security admission check IDs they stand for.
var controlChecks = map[string][]string{
	"HostProcess":              {"windowsHostProcess"},
	"Host Namespaces":          {"hostNamespaces"},
	"Privileged Containers":    {"privileged"},
	"Capabilities":             {"capabilities_baseline", "capabilities_restricted"},
	"HostPath Volumes":         {"hostPathVolumes"},
	"Host Ports":               {"hostPorts"},
	"Host Probes":              {"hostProbesAndHostLifecycle"},
	"AppArmor":                 {"appArmorProfile"},
	"SELinux":                  {"seLinuxOptions"},
	"/proc Mount Type":         {"procMount", "procMount_restricted"},
	"Seccomp":                  {"seccompProfile_baseline", "seccompProfile_restricted"},
	"Sysctls":                  {"sysctls"},
	"Volume Types":             {"restrictedVolumes"},
	"Privilege Escalation":     {"allowPrivilegeEscalation"},
	"Running as Non-root":      {"runAsNonRoot"},
	"Running as Non-root user": {"runAsUser"},
}

// ControlName returns the PSS control a check ID belongs to, "" if unknown.
func ControlName(checkID string) string {
	for name, ids := range controlChecks {
		for _, id := range ids {
			if id == checkID {
				return name
			}
		}
	}
	return ""
}

// KnownControl reports whether name is a control exclusions may name.
func KnownControl(name string) bool {
	_, ok := controlChecks[name]
	return ok
}

func controlCovers(control, checkID string) bool {
	for _, id := range controlChecks[control] {
		if id == checkID {
			return true
		}
	}
	return false
}
