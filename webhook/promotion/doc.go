// Package promotion is the gate of charter's staged Audit-to-Enforce
// promotion (DESIGN.md, Flows 6). A policy labelled charter.dev/staged:
// "true" acts as Enforce in a namespace labelled
// charter.dev/enforcement=enforce (the engine resolves that); this package
// decides whether a namespace may take that label: only when its
// PolicyReports hold no result of a staged policy that Enforce would turn
// into a denial.
//
// What blocks: a fail result always; an error result when its policy
// fails closed (failurePolicy Fail, the default), because an Enforce rule
// that errors denies exactly then (admission-reports.md §1.3). warn
// (unscored policies), pass and skip never block.
//
// The decision reads what the reports controller wrote: one PolicyReport
// per resource, named by the resource's UID (admission-reports.md §6). A
// resource not scanned yet has no report and so does not block; the
// denial lists what is known to fail, not what might.
package promotion
