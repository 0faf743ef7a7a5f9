// Package cleanup is charter's cleanup controller: it deletes what
// CleanupPolicies and ClusterCleanupPolicies select on their schedules,
// and objects whose cleanup.kyverno.io/ttl label has expired.
//
// It runs on the leader of its own Lease (<leader-election-id>-cleanup),
// so the replica that deletes need not be the one that writes reports.
//
// Scheduled policies (policy_controller.go): each policy is a key in a
// delaying queue, due at the next tick of its schedule after its last
// successful run (or its creation). A due policy lists the kinds its match
// names (paged, in its own namespace for a CleanupPolicy), asks the engine
// which objects it selects (match, exclude, conditions with the context
// loaded once per run) and deletes them, each with an event; status
// records lastExecutionTime and Ready/Stalled with the last error. A
// failed run is retried with backoff until it succeeds, and the policy is
// never dropped from the schedule (Kyverno gives up after ten tries).
//
// TTL (ttl_controller.go): every kind the controller may list, watch and
// delete cluster-wide (found by discovery, rechecked as CRDs come and go)
// gets a metadata-only informer on objects carrying the label. Each such
// object is a key in a delaying queue, due at its deadline; nothing
// rescans. An invalid value is reported by an event on the object and
// never guessed.
//
// Safety: charter's own namespace and kube-system are left alone by
// default (ExcludedNamespaces); a policy annotated charter.dev/dry-run:
// "true" only reports, by event, what it would delete; deletes carry the
// object's UID as a precondition, so an object recreated under the same
// name is never deleted for its predecessor.
package cleanup
