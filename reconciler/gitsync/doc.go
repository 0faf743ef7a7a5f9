// Package gitsync keeps a cluster in step with PolicyRepositories: each
// one names a Git repository, a ref and a folder; the reconciler asks the
// remote where the ref points, fetches that commit, builds the folder with
// kustomize, checks every object (policies through policycheck.Object, the
// check policy admission makes), and
// applies the revision whole or not at all with server-side apply, then
// prunes what left it.
//
// Sub-packages hold the steps: source (Git), build (kustomize), check
// (validation), apply (staged server-side apply and prune) and inventory.
// Setup wires the reconciler and the push receiver into a manager.
package gitsync
