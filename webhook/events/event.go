// Package events turns admission outcomes into Kubernetes Events with
// Kyverno's reasons, actions, notes and reporting controller names
// (admission-reports.md §3), so `kubectl describe`, `kubectl events` and
// tools that filter on reason=PolicyViolation or
// reportingController=kyverno-admission keep working against charter.
//
// Events are written by a Sink off the admission path: the handler hands a
// batch over with one non-blocking channel send, the sink's workers build
// the Events and create them, and a full queue drops the batch (and counts
// it) rather than slow an answer to the API server.
package events

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons, as Kyverno names them.
const (
	ReasonPolicyViolation = "PolicyViolation"
	ReasonPolicyApplied   = "PolicyApplied"
	ReasonPolicyError     = "PolicyError"
	ReasonPolicySkipped   = "PolicySkipped"
)

// Actions, as Kyverno names them.
const (
	ActionResourceBlocked   = "Resource Blocked"
	ActionResourcePassed    = "Resource Passed"
	ActionResourceGenerated = "Resource Generated"
	ActionResourceMutated   = "Resource Mutated"
	ActionResourceCleanedUp = "Resource Cleaned Up"
	ActionNone              = "None"
)

// Sources: the reportingController of the Events each component writes.
// Kyverno's names are kept because users filter on them.
const (
	SourceAdmission = "kyverno-admission"
	SourceScan      = "kyverno-scan"
	SourceGenerate  = "kyverno-generate"
	SourceMutate    = "kyverno-mutate"
	SourceCleanup   = "kyverno-cleanup"
)

// noteLimit is the API server's limit on an Event's note; longer notes are
// cut to noteLimit-3 characters and "..." as Kyverno does.
const noteLimit = 1024

// Event is one Event to write, before it gets a name and timestamps.
type Event struct {
	// Regarding is the object the event is about.
	Regarding corev1.ObjectReference
	// Related is a second object involved (the resource of a policy event).
	Related *corev1.ObjectReference
	Reason  string
	Action  string
	Note    string
}

// Type is Normal for PolicyApplied and PolicySkipped and Warning for every
// other reason, as in Kyverno.
func (e *Event) Type() string {
	if e.Reason == ReasonPolicyApplied || e.Reason == ReasonPolicySkipped {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// Batch is a set of events built on the sink's goroutine, so the admission
// path pays only for handing it over.
type Batch interface {
	Events() []Event
}

// List is a Batch of events built already.
type List []Event

// Events returns the list.
func (l List) Events() []Event { return l }

// apiEvent is the events.k8s.io/v1 Event for e. name is the object name;
// cluster-scoped objects' events go to the default namespace.
func apiEvent(e *Event, name, source, instance string, now time.Time) *eventsv1.Event {
	ns := e.Regarding.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	note := e.Note
	if len(note) > noteLimit {
		cut := noteLimit - 3
		for cut > 0 && !utf8.RuneStart(note[cut]) {
			cut--
		}
		note = note[:cut] + "..."
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: source,
		ReportingInstance:   instance,
		Action:              e.Action,
		Reason:              e.Reason,
		Regarding:           e.Regarding,
		Related:             e.Related,
		Note:                note,
		Type:                e.Type(),
	}
}

// eventName is "<regarding name>.<hex nanoseconds>", the regarding name
// made a valid DNS subdomain (lower case; characters such as ':' in RBAC
// names become '-') and short enough for the suffix.
func eventName(regarding string, nanos int64) string {
	suffix := fmt.Sprintf(".%x", nanos)
	var b strings.Builder
	for _, r := range strings.ToLower(regarding) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-.")
	if max := 253 - len(suffix); len(name) > max {
		name = strings.TrimRight(name[:max], "-.")
	}
	if name == "" {
		name = "event"
	}
	return name + suffix
}
