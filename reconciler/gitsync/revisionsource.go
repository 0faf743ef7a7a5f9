package gitsync

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/reconciler/gitsync/source"
	"github.com/charter-dev/charter/reconciler/gitsync/source/oci"
)

// revisionSource is where a PolicyRepository's revisions come from: a Git
// repository or an OCI registry. Everything after a revision is in a
// folder (build, check, test, dry-run, apply, prune, status) is shared.
type revisionSource interface {
	// resolve asks the remote which revision the ref names now, without
	// downloading it, and returns it as status reports it.
	resolve(ctx context.Context) (string, error)
	// fetch puts the resolved revision's tree in a folder of the cache.
	fetch(ctx context.Context) (string, error)
	// verify checks the fetched revision's signature against
	// spec.verify, and says who signed it.
	verify(ctx context.Context, dir string) (string, error)
	// fetchFailed is the Ready reason of a remote that could not be
	// asked or read.
	fetchFailed() string
}

// sourceOf returns obj's source, reading its credentials.
func (r *PolicyRepositoryReconciler) sourceOf(ctx context.Context, obj *gitopsv1alpha1.PolicyRepository, w writer) (revisionSource, error) {
	if obj.Spec.IsOCI() {
		return r.ociSourceOf(ctx, obj, w)
	}
	if obj.Spec.Insecure {
		return nil, &specError{errors.New("spec.insecure is for oci:// repositories only")}
	}
	auth, err := r.auth(ctx, obj)
	if err != nil {
		return nil, err
	}
	return &gitSource{r: r, obj: obj, auth: auth}, nil
}

// gitSource is a Git repository: ls-remote, a shallow clone, OpenPGP
// signatures.
type gitSource struct {
	r    *PolicyRepositoryReconciler
	obj  *gitopsv1alpha1.PolicyRepository
	auth *source.Auth
	rev  source.Revision
}

func (g *gitSource) fetchFailed() string { return gitopsv1alpha1.ReasonFetchFailed }

func (g *gitSource) resolve(ctx context.Context) (string, error) {
	rev, err := source.LsRemote(ctx, g.obj.Spec.URL, source.RefFrom(g.obj.Spec.Ref), g.auth)
	g.rev = rev
	return rev.String(), err
}

func (g *gitSource) fetch(ctx context.Context) (string, error) {
	dir, _, err := g.r.Cache.Checkout(ctx, g.obj.Namespace+"/"+g.obj.Name, g.obj.Spec.URL, g.rev, g.auth)
	return dir, err
}

func (g *gitSource) verify(ctx context.Context, dir string) (string, error) {
	v := g.obj.Spec.Verify
	if v.Provider != "" && v.Provider != gitopsv1alpha1.ProviderPGP {
		return "", &source.VerificationError{Commit: g.rev.Commit, Reason: fmt.Sprintf("spec.verify.provider %s verifies OCI artifacts; a Git commit is verified with pgp", v.Provider)}
	}
	if v.SecretRef.Name == "" {
		return "", &source.VerificationError{Commit: g.rev.Commit, Reason: "spec.verify.secretRef is required for a Git repository (its OpenPGP public keys); matchOIDCIdentity is for OCI artifacts"}
	}
	secret, err := g.r.verificationSecret(ctx, g.obj)
	if err != nil {
		return "", err
	}
	signer, err := source.VerifyHead(dir, g.rev.Commit, secret.Data)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("verified signature of commit %s by key %s", g.rev.Commit, signer), nil
}

func (r *PolicyRepositoryReconciler) verificationSecret(ctx context.Context, obj *gitopsv1alpha1.PolicyRepository) (*corev1.Secret, error) {
	name := obj.Spec.Verify.SecretRef.Name
	var secret corev1.Secret
	if err := r.secrets().Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: name}, &secret); err != nil {
		return nil, fmt.Errorf("verification secret %s/%s: %w", obj.Namespace, name, err)
	}
	return &secret, nil
}

// fetchError records a failed fetch: a revision over the limits, or an
// artifact charter does not extract, stalls (it stays so under its commit
// or digest); anything else retries.
func fetchError(src revisionSource, revision string, err error) (terminal bool, reason string, out error) {
	var lerr *source.LimitError
	var aerr *oci.ArtifactError
	switch {
	case errors.As(err, &lerr):
		return true, gitopsv1alpha1.ReasonLimitExceeded, fmt.Errorf("revision %s: %w", revision, err)
	case errors.As(err, &aerr):
		return true, gitopsv1alpha1.ReasonArtifactInvalid, fmt.Errorf("revision %s: %w", revision, err)
	}
	return false, src.fetchFailed(), err
}

// specError is a spec no sync can satisfy (a URL charter cannot read, a
// setting it refuses): the repository stalls until the spec changes.
type specError struct{ error }

func (e *specError) Unwrap() error { return e.error }

// fetchReasonOf is the Ready reason of a remote of obj's kind that could
// not be asked or read.
func fetchReasonOf(obj *gitopsv1alpha1.PolicyRepository) string {
	if obj.Spec.IsOCI() {
		return gitopsv1alpha1.ReasonOCIFetchFailed
	}
	return gitopsv1alpha1.ReasonFetchFailed
}
