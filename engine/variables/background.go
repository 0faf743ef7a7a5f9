package variables

import (
	"fmt"
	"regexp"
)

// admissionOnlyPattern matches the context roots that exist only during
// admission: who made the request and with which roles. A background scan has
// no request, so policies with background: true may not use them. The root
// must not follow a '.', so element.request.userInfo is not matched.
var admissionOnlyPattern = regexp.MustCompile(`(?:^|[^.\w])(request\.userInfo|request\.roles|request\.clusterRoles|serviceAccountName|serviceAccountNamespace)\b`)

// AdmissionOnly returns the admission-only root (e.g. "request.userInfo")
// that expr uses, if any.
func AdmissionOnly(expr string) (string, bool) {
	m := admissionOnlyPattern.FindStringSubmatch(expr)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// BackgroundError reports a variable that cannot be evaluated in a
// background scan.
type BackgroundError struct {
	Variable string // the variable's expression
	Root     string // the admission-only root it uses
	Path     string // JSON pointer of the string holding it
}

func (e *BackgroundError) Error() string {
	return fmt.Sprintf("variable %q at path %s uses %s, which is only available during admission: set spec.background to false", e.Variable, e.Path, e.Root)
}

// CheckBackground returns a *BackgroundError for the first variable in doc
// (values and map keys) that uses an admission-only root. pointer is the JSON
// pointer of doc within the policy, used in the error.
func CheckBackground(doc any, pointer string) error {
	w := &substituter{options: options{base: parsePointer(pointer)}}
	var found error
	_, _, _ = w.walk(doc, variableMarker, func(s string, _ bool) (any, error) {
		if found != nil {
			return s, nil
		}
		for _, expr := range Find(s) {
			if root, ok := AdmissionOnly(expr); ok {
				found = &BackgroundError{Variable: expr, Root: root, Path: w.pointer()}
				break
			}
		}
		return s, nil
	})
	return found
}
