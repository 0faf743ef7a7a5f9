// Package clusterstate is what charter knows of the live cluster, shared
// by every controller of one process, as Kyverno's pkg/policycache and its
// shared informer factories are: the controllers subscribe to it instead
// of each watching policies and namespaces themselves.
//
//   - policycache: the one informer-fed source of installed policies and
//     exceptions, and their one compile: the Snapshot (admission sets, the
//     reports and background views, every policy's compiled unit), the
//     Installed objects, and change notifications for both;
//   - policycheck: the kind table (every kind charter serves, its scope
//     and role) and the check of one policy object that policy admission,
//     the GitOps pre-apply check and the CLI share;
//   - namespace labels, from the same informers, for namespaceSelectors;
//   - loaders: what the engine's context entries read (ConfigMaps, API
//     calls), handed to the engine through loader.Loaders.
//
// State bundles them; cmd/charter builds one per process and hands it to
// admission, reports, background and cleanup.
package clusterstate
