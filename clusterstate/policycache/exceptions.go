package policycache

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ExceptionNamespaces are the namespaces whose PolicyExceptions charter
// honours (serve's --exception-namespaces, Kyverno's --exceptionNamespace).
// A PolicyException exempts whatever its match selects, in any namespace,
// as in Kyverno: so whoever may write one in a trusted namespace can exempt
// anything, and only the platform team's namespace should be trusted. An
// exception from any other namespace is left out of every policy set the
// process compiles (admission, reports and the controllers to come), and an
// event on it says why.
//
// The zero value trusts no namespace.
type ExceptionNamespaces struct {
	all   bool
	names []string
}

// AllExceptionNamespaces trusts every namespace ("*"), as Kyverno does
// with --exceptionNamespace=*: any namespace's exception can exempt any
// resource. charter dev runs so; an install should not.
func AllExceptionNamespaces() ExceptionNamespaces { return ExceptionNamespaces{all: true} }

// ParseExceptionNamespaces reads a list of namespace names; "*" among them
// trusts every namespace. An invalid name is an error naming it.
func ParseExceptionNamespaces(list []string) (ExceptionNamespaces, error) {
	var out ExceptionNamespaces
	for _, n := range list {
		n = strings.TrimSpace(n)
		switch {
		case n == "*":
			out.all = true
		case n == "":
			return ExceptionNamespaces{}, fmt.Errorf("an empty namespace name")
		default:
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				return ExceptionNamespaces{}, fmt.Errorf("namespace %q: %s", n, strings.Join(errs, "; "))
			}
			if !slices.Contains(out.names, n) {
				out.names = append(out.names, n)
			}
		}
	}
	return out, nil
}

// Trusts reports whether exceptions in namespace are honoured.
func (e ExceptionNamespaces) Trusts(namespace string) bool {
	return e.all || slices.Contains(e.names, namespace)
}

// String is the list as the flag takes it.
func (e ExceptionNamespaces) String() string {
	if e.all {
		return "*"
	}
	return strings.Join(e.names, ",")
}

// IgnoredReason says why an exception (kyverno.io or policies.kyverno.io)
// from an untrusted namespace is ignored, for the event on it and the
// warning when it is applied.
func (e ExceptionNamespaces) IgnoredReason(ex metav1.Object) string {
	trusted := "no namespace"
	if len(e.names) > 0 {
		trusted = "namespace"
		if len(e.names) > 1 {
			trusted += "s"
		}
		trusted += " " + strings.Join(e.names, ", ")
	}
	return fmt.Sprintf("PolicyException %s/%s is ignored: charter honours PolicyExceptions only from %s (--exception-namespaces=%s), not from %q",
		ex.GetNamespace(), ex.GetName(), trusted, e.String(), ex.GetNamespace())
}

// IgnoredException is an exception left out because its namespace is not
// trusted, with the reason: a *kyvernov2.PolicyException or a
// *policiesv1.PolicyException.
type IgnoredException struct {
	Exception client.Object
	Reason    string
}

// trustedExceptions splits exceptions of either group into those honoured
// and those ignored.
func trustedExceptions[T client.Object](e ExceptionNamespaces, exceptions []T) (trusted []T, ignored []IgnoredException) {
	if e.all {
		return exceptions, nil
	}
	trusted = make([]T, 0, len(exceptions))
	for _, ex := range exceptions {
		if e.Trusts(ex.GetNamespace()) {
			trusted = append(trusted, ex)
			continue
		}
		ignored = append(ignored, IgnoredException{Exception: ex, Reason: e.IgnoredReason(ex)})
	}
	return trusted, ignored
}

// ignoredOnce remembers the generation of each exception last reported as
// ignored (by UID, else namespace/name), so its event is sent once per
// generation, not once per rebuild.
type ignoredOnce map[string]int64

// fresh returns the ignored exceptions not yet reported at their current
// generation and forgets the exceptions no longer ignored, so one that is
// ignored again later is reported again.
func (seen ignoredOnce) fresh(ignored []IgnoredException) []IgnoredException {
	now := make(map[string]bool, len(ignored))
	var out []IgnoredException
	for _, ig := range ignored {
		ex := ig.Exception
		key := string(ex.GetUID())
		if key == "" {
			key = ex.GetObjectKind().GroupVersionKind().Group + ":" + ex.GetNamespace() + "/" + ex.GetName()
		}
		now[key] = true
		if last, ok := seen[key]; ok && last == ex.GetGeneration() {
			continue
		}
		seen[key] = ex.GetGeneration()
		out = append(out, ig)
	}
	for key := range seen {
		if !now[key] {
			delete(seen, key)
		}
	}
	return out
}
