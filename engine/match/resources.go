package match

import "strings"

// irregularResources are the built-in kinds whose resource name is not the
// regular plural of the kind.
var irregularResources = map[string]string{
	"Endpoints":                        "endpoints",
	"PodSecurityPolicy":                "podsecuritypolicies",
	"ComponentStatus":                  "componentstatuses",
	"PodMetrics":                       "pods",
	"NodeMetrics":                      "nodes",
	"SecurityContextConstraints":       "securitycontextconstraints",
	"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
}

// ResourceForKind returns the resource name of a kind by Kubernetes'
// conventions (lower case, plural), which every built-in kind and most
// CRDs follow. Offline callers (the CLI) use it where the API server
// would say.
func ResourceForKind(kind string) string {
	if r, ok := irregularResources[kind]; ok {
		return r
	}
	k := strings.ToLower(kind)
	switch {
	case k == "":
		return ""
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsRune("aeiou", rune(k[len(k)-2])):
		return k[:len(k)-1] + "ies"
	}
	return k + "s"
}
