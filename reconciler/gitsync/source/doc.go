// Package source fetches a PolicyRepository's revision from Git: it asks the
// remote which commit a ref points at (ls-remote) without cloning, shallow
// clones that commit into a cache folder, and verifies its OpenPGP signature.
//
// Errors never carry credentials: URLs are stripped of their user info and
// every secret value is masked before an error leaves the package.
package source
