// Package reports is charter's reports controller: background scans of
// existing resources and the wgpolicyk8s.io/v1alpha2 reports that hold
// their results, one report per resource (DESIGN.md flow 3,
// admission-reports.md §6).
//
// How it works, and why it stays small:
//
//   - The controller watches no policy and compiles none: it subscribes
//     to the process's policy cache, whose every snapshot carries the
//     background scan's set (policycache.Snapshot.Reports: the
//     background-enabled policies, compiled once per process, with both
//     groups' exceptions), and works out, per watched resource type, a
//     fingerprint of the policies that can match it.
//   - Each resource type that a background policy's validate rules name
//     (after autogen) is watched with a metadata-only informer, stripped of
//     managedFields: 10,000 Pods cost a few megabytes. Full objects are
//     never cached: scans LIST them page by page and drop each page after
//     evaluation; a watch event fetches the one object it names.
//   - Per resource the controller remembers only a content hash, the
//     policy fingerprint it was evaluated with, and a digest of its
//     report's results. A resource whose hash and fingerprint are unchanged
//     is not evaluated; a report whose results (timestamps aside) are
//     unchanged is not written. So a rescan that finds nothing new writes
//     nothing, and a policy change re-evaluates only the resource types
//     that policy can match.
//   - Reports are named after the resource's UID, live in its namespace
//     (ClusterPolicyReport for cluster-scoped resources) and are owned by
//     it. Every write is conditional: a create when the report is known
//     to be absent, else an update or delete at the resourceVersion last
//     read or written. Another writer's change (an admission replica, or
//     a second replica that believes it leads) turns up as a conflict,
//     and the report is read again and merged, never overwritten.
//   - The API server, not this process, is the bottleneck of a first scan
//     (about nine tenths of the CPU at 10,000 reports: decoding, pruning
//     and validating each custom resource, and decoding it again for its
//     watch cache). So evaluations (--reports-workers) and writes in flight
//     (--reports-write-workers) are bounded apart, the next page is listed
//     while the current one is written, a report is encoded once from a
//     typed struct, and a write asks only for metadata back, of which it
//     reads the resourceVersion alone.
//   - Exceptions with spec.background: false bind to admission only
//     (admission-reports.md §7): background scans leave them out.
//   - Audit results from the admission webhook arrive through an
//     AdmissionQueue (bounded, never blocks admission) and are merged into
//     the same reports by timestamp (§6.3) by an AdmissionWriter, which is
//     not leader-elected: every admission replica writes its own results.
//     Nothing about them is kept only in memory that a background scan
//     would not rebuild: after a restart the report sweep and the first
//     scan make every background result right again.
//   - On start, on every policy removal and on each periodic full rescan
//     the controller sweeps all of charter's reports: results of policies
//     or rules that no longer exist are dropped, reports left empty are
//     deleted. The sweep reads the API server's watch cache as it stands
//     (conditional writes make a stale copy harmless); on start it runs
//     while the policy informers sync, and scans wait for it.
//   - The sweep also deletes the report of a resource that is gone (or
//     was recreated under the same name with a new UID) without a delete
//     event having been seen: on a control plane without a garbage
//     collector nothing else would. It decides only from a synced
//     informer confirmed by a live GET; reports met before their type's
//     first scan wait for it (gone.go).
//   - A policy that reads validate.cel params is fingerprinted with the
//     generation of each param kind it reads (clusterstate/params counts
//     the changes of the kind's objects): a param created, edited or
//     deleted rescans, like a policy change, the resource types of those
//     policies only.
//   - With Options.Metrics, each evaluation (not each skipped resource)
//     records Kyverno's kyverno_policy_results_total and
//     kyverno_policy_execution_duration_seconds, cause background_scan,
//     through the recorder the admission webhook uses.
//
// The controller runs under leader election, the admission writer on
// every replica; see Setup.
package reports
