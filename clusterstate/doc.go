// Package clusterstate is what charter knows of the live cluster, shared
// by every controller of one process, as Kyverno's pkg/policycache and its
// shared informer factories are: the controllers subscribe to it instead
// of each watching policies and namespaces themselves.
//
//   - policycache: the one informer-fed source of installed policies and
//     exceptions: the compiled admission Snapshot, the Installed objects,
//     and change notifications for both;
//   - namespace labels, from the same informers, for namespaceSelectors;
//   - loaders: what the engine's context entries read (ConfigMaps, API
//     calls), handed to the engine through engine.Loaders.
//
// State bundles them; cmd/charter builds one per process and hands it to
// admission, reports, background and cleanup.
package clusterstate
