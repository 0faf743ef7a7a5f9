package autogen

import (
	"regexp"
	"strings"
)

// referencePattern finds $(...) references in a validation message, except
// escaped ones (\$(...)). A match may start with the character before "$".
var referencePattern = regexp.MustCompile(`^\$\(.[^\ ]*\)|[^\\]\$\(.[^\ ]*\)`)

// shiftReferences moves the $(...) references of a validation message that
// point into the rule's pattern (pivot "pattern", "anyPattern", "deny" or
// "podSecurity") down by shift, so that "$(./../pattern/spec/x)" becomes
// "$(./../pattern/spec/template/spec/x)" once the pattern is wrapped under
// spec.template. For anyPattern the pattern index stays in front of the
// shift: "anyPattern/1/spec" becomes "anyPattern/1/spec/template/spec".
// References that do not name the pivot are left alone.
func shiftReferences(message, shift, pivot string) string {
	for _, found := range referencePattern.FindAllString(message, -1) {
		ref := found
		prefix := ""
		if !strings.HasPrefix(found, "$(") {
			prefix, ref = found[:1], found[1:]
		}
		index := strings.Index(ref, pivot)
		if index < 0 {
			continue
		}
		p := pivot
		if pivot == "anyPattern" {
			rest := ref[index+len(pivot):]
			rest = strings.TrimPrefix(rest, "/")
			p = pivot + "/" + strings.Split(rest, "/")[0]
		}
		shifted := strings.ReplaceAll(ref, p, p+"/"+shift)
		message = strings.Replace(message, found, prefix+shifted, 1)
	}
	return message
}
