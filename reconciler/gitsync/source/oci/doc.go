// Package oci reads and writes policy bundles as OCI artifacts in Flux's
// format (flux push artifact): an image manifest whose config has the
// media type application/vnd.cncf.flux.config.v1+json and whose one layer
// (application/vnd.cncf.flux.content.v1.tar+gzip) is a gzipped tarball of
// a folder, laid out as a Git checkout is (spec.path, kustomize).
//
// A Remote resolves a PolicyRepository's ref (tag, semver or digest) to a
// digest with HEAD requests and tag lists only, so an unchanged artifact
// costs no layer bytes; Pull fetches a digest, never a tag, so what is
// verified and applied is exactly what was resolved. Extraction refuses
// links, paths that leave the folder and anything over the gitsync limits.
// Archive and Push build and push artifacts for charter push.
//
// Plain HTTP is used only when asked (Insecure) and only for a loopback
// registry: go-containerregistry would otherwise fall back to HTTP for
// private addresses by itself.
package oci
