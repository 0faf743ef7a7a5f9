package apply

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// maxFieldsNamed bounds the fields a conflict names per manager: the
// message goes into a condition, which must stay readable.
const maxFieldsNamed = 5

// ManagerFields is another field manager and the fields it holds.
type ManagerFields struct {
	Manager string
	Fields  []string
}

// ConflictError is an object of the revision that would take over what
// another field manager placed: fields it holds with other values (the
// API server's apply conflict), or, when Existing, an object that exists,
// is not in the repository's inventory and another manager holds. Without
// spec.force nothing of the revision applies.
type ConflictError struct {
	Existing bool
	Managers []ManagerFields
}

func (e *ConflictError) Error() string {
	held := make([]string, len(e.Managers))
	for i, m := range e.Managers {
		fields := m.Fields
		more := ""
		if len(fields) > maxFieldsNamed {
			more = fmt.Sprintf(" and %d more", len(fields)-maxFieldsNamed)
			fields = fields[:maxFieldsNamed]
		}
		held[i] = fmt.Sprintf("%s held by field manager %q", strings.Join(fields, ", ")+more, m.Manager)
		if len(fields) == 0 {
			held[i] = fmt.Sprintf("field manager %q", m.Manager)
		}
	}
	what := "conflict: " + strings.Join(held, "; ")
	if e.Existing {
		what = "exists and is not this repository's (not in its inventory): " + strings.Join(held, "; ")
	}
	return what + "; not taken over without spec.force"
}

// Conflict reports whether an object of the revision would take over
// what another field manager holds.
func (e *Error) Conflict() bool {
	for _, oe := range e.Errs {
		var ce *ConflictError
		if errors.As(oe.Err, &ce) {
			return true
		}
	}
	return false
}

// conflictOf turns the API server's apply conflict into a *ConflictError
// naming each manager and its fields; any other error is returned as it
// is.
func conflictOf(err error) error {
	causes := conflictCauses(err)
	if len(causes) == 0 {
		return err
	}
	byManager := map[string][]string{}
	for _, c := range causes {
		byManager[c.manager] = append(byManager[c.manager], c.field)
	}
	ce := &ConflictError{}
	for m, fields := range byManager {
		ce.Managers = append(ce.Managers, ManagerFields{Manager: m, Fields: fields})
	}
	sort.Slice(ce.Managers, func(i, j int) bool { return ce.Managers[i].Manager < ce.Managers[j].Manager })
	return ce
}

type conflictCause struct{ manager, field string }

// conflictCauses reads the managers and fields of an apply conflict from
// the status causes of the API server's 409 ("conflict with \"kubectl\"
// using v1", field ".data.a").
func conflictCauses(err error) []conflictCause {
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []conflictCause
	for _, c := range status.Status().Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		rest, ok := strings.CutPrefix(c.Message, "conflict with ")
		if !ok {
			continue
		}
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			continue
		}
		manager, _ := strconv.Unquote(quoted)
		out = append(out, conflictCause{manager: manager, field: c.Field})
	}
	return out
}

// fieldSet parses a managed fields entry; an entry that does not parse
// counts as empty.
func fieldSet(f *metav1.FieldsV1) *fieldpath.Set {
	set := &fieldpath.Set{}
	if f != nil {
		if err := set.FromJSON(bytes.NewReader(f.Raw)); err != nil {
			return &fieldpath.Set{}
		}
	}
	return set
}

// leaves lists the fields of a set, as the API server names them in
// conflicts (".data.a").
func leaves(set *fieldpath.Set) []string {
	var out []string
	set.Leaves().Iterate(func(p fieldpath.Path) { out = append(out, p.String()) })
	sort.Strings(out)
	return out
}
