package manifest

import (
	"fmt"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/policyid"
)

// Declared records where each policy read so far was declared, by
// policyid.Of, to refuse a second declaration of one policy. The API
// server never holds two objects of one kind, namespace and name, but
// files can; policies of different kinds and one name (a ClusterPolicy
// and its ValidatingPolicy translation) are two policies, not a
// duplicate.
type Declared map[string]string

// Add records the policies of a file (or "file (document N)"), and fails
// on the first one declared before, naming both places.
func (d Declared) Add(where string, policies ...kyvernov1.PolicyInterface) error {
	for _, p := range policies {
		id := policyid.Of(p)
		if first, dup := d[id]; dup {
			if first == where {
				return fmt.Errorf("%s %s is declared twice in %s", p.GetKind(), policyid.Key(p), where)
			}
			return fmt.Errorf("%s %s is declared twice: in %s and in %s", p.GetKind(), policyid.Key(p), first, where)
		}
		d[id] = where
	}
	return nil
}
