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
	"iter"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/engine"
)

// Reasons, as Kyverno names them.
const (
	ReasonPolicyViolation = "PolicyViolation"
	ReasonPolicyApplied   = "PolicyApplied"
	ReasonPolicyError     = "PolicyError"
	ReasonPolicySkipped   = "PolicySkipped"
	// ReasonEnforcementDowngraded is charter's: a Namespace moved from
	// charter.dev/enforcement=enforce back to Audit, and who did it.
	ReasonEnforcementDowngraded = "EnforcementDowngraded"
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
	// Note is the event's text, unless text holds what it is made of.
	Note string
	// text, when set, is the note not formatted yet: an admission's
	// events are formatted only when created (Admission.Events).
	text noteText
}

// note is the event's text.
func (e *Event) note() string {
	if e.text.form == noteAsIs {
		return e.Note
	}
	return e.text.String()
}

// noteForm says how a noteText is formatted.
type noteForm uint8

const (
	// noteAsIs: the note is Event.Note.
	noteAsIs noteForm = iota
	// notePolicyViolation: "Pod default/nginx: [rule] fail (blocked); <message>".
	notePolicyViolation
	// noteResourceViolation: "policy <policy>/<rule> fail: <message>".
	noteResourceViolation
	// notePolicyApplied: "Pod default/nginx: pass".
	notePolicyApplied
)

// noteText is what an admission event's note is made of. It is
// comparable, so the sink keys series by it (two rules failing on one
// object are two events) without formatting anything.
type noteText struct {
	form         noteForm
	resource     engine.ResourceRef
	policy, rule string
	status       engine.RuleStatus
	message      string
	blocked      bool
}

// String formats the note as Kyverno's admission events word it.
func (t noteText) String() string {
	switch t.form {
	case notePolicyViolation:
		note := policyNoteResource(t.resource) + ": [" + t.rule + "] " + eventStatus(t.status)
		if t.blocked {
			note += " (blocked)"
		}
		return note + "; " + t.message
	case noteResourceViolation:
		return "policy " + t.policy + "/" + t.rule + " " + eventStatus(t.status) + ": " + t.message
	case notePolicyApplied:
		return policyNoteResource(t.resource) + ": pass"
	}
	return ""
}

// Type is Normal for PolicyApplied and PolicySkipped and Warning for every
// other reason, as in Kyverno.
func (e *Event) Type() string {
	if e.Reason == ReasonPolicyApplied || e.Reason == ReasonPolicySkipped {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// Batch is a set of events, built on the sink's goroutine so the admission
// path pays only for handing it over.
type Batch interface {
	// Events yields the events; the sink reads each one during the yield
	// only, so a batch may reuse one Event for all of them.
	Events() iter.Seq[*Event]
}

// List is a Batch of events built already.
type List []Event

// Events yields the list's events.
func (l List) Events() iter.Seq[*Event] {
	return func(yield func(*Event) bool) {
		for i := range l {
			if !yield(&l[i]) {
				return
			}
		}
	}
}

// apiEvent is the events.k8s.io/v1 Event for e. name is the object name;
// cluster-scoped objects' events go to the default namespace.
func apiEvent(e *Event, name, source, instance string, now time.Time) *eventsv1.Event {
	ns := e.Regarding.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	note := e.note()
	if len(note) > noteLimit {
		cut := noteLimit - 3
		for cut > 0 && !utf8.RuneStart(note[cut]) {
			cut--
		}
		note = note[:cut] + "..."
	}
	// The batch may reuse what e points to; the Event is the writer's.
	var related *corev1.ObjectReference
	if e.Related != nil {
		r := *e.Related
		related = &r
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: source,
		ReportingInstance:   instance,
		Action:              e.Action,
		Reason:              e.Reason,
		Regarding:           e.Regarding,
		Related:             related,
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
