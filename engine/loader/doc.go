// Package loader holds what the engine asks of the world, since it does
// no I/O itself: the Loaders a caller hands it (objects, params,
// ConfigMaps, API and http calls, image data, GlobalContextEntries,
// namespace labels, the resource.* library, the CEL authorizer), the
// ImageVerifier of verifyImages rules and ImageValidatingPolicies with
// the questions it answers (ImageCheck, ImageCredentials) and the error
// that says a registry could not be asked (ImageUnavailableError). It is
// a leaf of engine/: the engine root and its kind packages import it, and
// the rooms that implement a loader (clusterstate, imageverify, the CLI)
// import it instead of the engine.
package loader
