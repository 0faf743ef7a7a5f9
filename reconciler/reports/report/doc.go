// Package report turns engine responses into wgpolicyk8s.io/v1alpha2 report
// results and keeps one report per resource: result fields (§6.2 of
// admission-reports.md), merge semantics of admission and background
// results (§6.3), pruning of results whose policy or rule is gone, the
// report object itself (name, labels, owner, scope, summary), and the
// digests the controller compares so that a rescan that finds nothing new
// writes nothing.
//
// Everything here is pure: no clients, no clocks (the caller passes the
// time), no goroutines.
package report
