package gitsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/reconciler/gitsync/source"
	"github.com/charter-dev/charter/reconciler/gitsync/source/oci"
)

// ociSource is an OCI repository of artifacts in Flux's format: HEAD
// requests to resolve, a pull by digest, cosign signatures.
type ociSource struct {
	r      *PolicyRepositoryReconciler
	obj    *gitopsv1alpha1.PolicyRepository
	remote *oci.Remote
	// pullSecrets are the names, in obj's namespace, of the docker
	// config Secrets the registry is read with.
	pullSecrets []string
	rev         oci.Revision
}

// ArtifactVerificationError is an artifact whose signatures do not
// satisfy spec.verify: a verdict on the digest, which does not change.
type ArtifactVerificationError struct {
	Revision string
	Reason   string
}

func (e *ArtifactVerificationError) Error() string {
	return fmt.Sprintf("artifact %s: %s", e.Revision, e.Reason)
}

// ociSourceOf reads obj's registry credentials: spec.secretRef, else the
// imagePullSecrets of the ServiceAccount the repository runs as. Both are
// Secrets of obj's namespace only, and charter's own registry credentials
// (its Docker config, credential helpers) are never used: a tenant's
// repository reads with what its namespace holds, or anonymously.
func (r *PolicyRepositoryReconciler) ociSourceOf(ctx context.Context, obj *gitopsv1alpha1.PolicyRepository, w writer) (*ociSource, error) {
	var names []string
	switch {
	case obj.Spec.SecretRef != nil:
		names = []string{obj.Spec.SecretRef.Name}
	case w.serviceAccount != "":
		// A ServiceAccount that does not exist has no imagePullSecrets:
		// the registry is read anonymously (impersonating it still
		// decides what applies).
		var sa corev1.ServiceAccount
		if err := r.secrets().Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: w.serviceAccount}, &sa); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("ServiceAccount %s/%s (its imagePullSecrets): %w", obj.Namespace, w.serviceAccount, err)
		}
		for _, s := range sa.ImagePullSecrets {
			names = append(names, s.Name)
		}
	}
	keychain := authn.Keychain(authn.NewMultiKeychain())
	if len(names) > 0 {
		secrets := make([]corev1.Secret, 0, len(names))
		for _, n := range names {
			var s corev1.Secret
			if err := r.secrets().Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: n}, &s); err != nil {
				return nil, fmt.Errorf("registry credentials secret %s/%s: %w", obj.Namespace, n, err)
			}
			if len(s.Data[corev1.DockerConfigJsonKey]) == 0 && len(s.Data[corev1.DockerConfigKey]) == 0 {
				return nil, fmt.Errorf("registry credentials secret %s/%s holds no %s: an oci:// repository reads a docker config (kubectl create secret docker-registry)", obj.Namespace, n, corev1.DockerConfigJsonKey)
			}
			secrets = append(secrets, s)
		}
		kc, err := kauth.NewFromPullSecrets(ctx, secrets)
		if err != nil {
			return nil, fmt.Errorf("registry credentials: %w", err)
		}
		keychain = kc
	}
	remote, err := oci.NewRemote(obj.Spec.URL, oci.WithInsecure(obj.Spec.Insecure), oci.WithKeychain(keychain), oci.WithTransport(r.registryTransport()))
	if err != nil {
		return nil, &specError{fmt.Errorf("spec.url %s: %w", obj.Spec.URL, err)}
	}
	return &ociSource{r: r, obj: obj, remote: remote, pullSecrets: names}, nil
}

func (o *ociSource) fetchFailed() string { return fetchReasonOf(o.obj) }

func (o *ociSource) resolve(ctx context.Context) (string, error) {
	rev, err := o.remote.Resolve(ctx, oci.RefFrom(o.obj.Spec.Ref))
	o.rev = rev
	return rev.String(), err
}

func (o *ociSource) fetch(ctx context.Context) (string, error) {
	dir, _, err := o.r.Cache.Fill(o.obj.Namespace+"/"+o.obj.Name, "oci-"+o.rev.ID(), func(dir string) error {
		_, err := o.remote.Pull(ctx, o.rev, dir, o.r.Cache.Limits)
		return err
	})
	return dir, err
}

// verify checks the cosign signatures of the resolved digest, the one
// pulled: a tag moved since cannot swap what is verified. Keys come from
// spec.verify.secretRef (every value holding a PEM public key is one
// trusted signer); keyless identities from matchOIDCIdentity, checked
// against Sigstore's public Fulcio and Rekor. One accepted signature is
// enough. Results are cached by digest, as for admission.
func (o *ociSource) verify(ctx context.Context, _ string) (string, error) {
	v := o.obj.Spec.Verify
	if v.Provider != "" && v.Provider != gitopsv1alpha1.ProviderCosign {
		return "", &ArtifactVerificationError{Revision: o.rev.String(), Reason: fmt.Sprintf("spec.verify.provider %s verifies Git commits; an OCI artifact is verified with cosign", v.Provider)}
	}
	if v.Mode != "" {
		return "", &ArtifactVerificationError{Revision: o.rev.String(), Reason: "spec.verify.mode is for Git repositories"}
	}
	type attestor struct {
		what string
		kyvernov1.Attestor
	}
	var attestors []attestor
	if v.SecretRef.Name != "" {
		secret, err := o.r.verificationSecret(ctx, o.obj)
		if err != nil {
			return "", err
		}
		for _, k := range slices.Sorted(maps.Keys(secret.Data)) {
			if !strings.Contains(string(secret.Data[k]), "PUBLIC KEY-----") {
				continue
			}
			attestors = append(attestors, attestor{
				what: fmt.Sprintf("key %s of secret %s", k, v.SecretRef.Name),
				// A key signs offline, as Flux verifies with one: no
				// transparency log is asked, so air-gapped clusters
				// verify too.
				Attestor: kyvernov1.Attestor{Keys: &kyvernov1.StaticKeyAttestor{
					PublicKeys: string(secret.Data[k]),
					Rekor:      &kyvernov1.Rekor{IgnoreTlog: true},
					CTLog:      &kyvernov1.CTLog{IgnoreSCT: true},
				}},
			})
		}
		if len(attestors) == 0 {
			return "", &ArtifactVerificationError{Revision: o.rev.String(), Reason: fmt.Sprintf("verification secret %s/%s holds no PEM public key", o.obj.Namespace, v.SecretRef.Name)}
		}
	}
	for _, id := range v.MatchOIDCIdentity {
		attestors = append(attestors, attestor{
			what:     fmt.Sprintf("keyless identity issuer %q subject %q", id.Issuer, id.Subject),
			Attestor: kyvernov1.Attestor{Keyless: &kyvernov1.KeylessAttestor{IssuerRegExp: id.Issuer, SubjectRegExp: id.Subject}},
		})
	}
	if len(attestors) == 0 {
		return "", &ArtifactVerificationError{Revision: o.rev.String(), Reason: "spec.verify names no keys (secretRef) and no matchOIDCIdentity"}
	}
	image := o.remote.Repository().Name() + "@" + o.rev.Digest
	creds := loader.ImageCredentials{Namespace: o.obj.Namespace, PullSecrets: o.pullSecrets, Scope: o.obj.Namespace}
	if o.obj.Spec.Insecure {
		creds.Registry = &kyvernov1.ImageRegistryCredentials{AllowInsecureRegistry: true}
	}
	var refusals []string
	for _, a := range attestors {
		_, err := o.r.signatures().VerifySignatures(ctx, loader.ImageCheck{
			Image: image, Attestor: a.Attestor, Credentials: creds, UseCache: true,
			Scope: "gitops.charter.dev/policyrepository/" + o.obj.Namespace + "/" + o.obj.Name,
		})
		if err == nil {
			return fmt.Sprintf("verified cosign signature of %s by %s", o.rev, a.what), nil
		}
		if loader.IsImageUnavailable(err) {
			// No verdict: the registry or the transparency log could not
			// be asked. Retried, not stalled.
			return "", fmt.Errorf("verifying %s: %w", o.rev, err)
		}
		refusals = append(refusals, fmt.Sprintf("%s: %v", a.what, err))
	}
	return "", &ArtifactVerificationError{Revision: o.rev.String(), Reason: "no accepted cosign signature: " + strings.Join(refusals, "; ")}
}

// signatures is the verifier of artifacts' cosign signatures.
func (r *PolicyRepositoryReconciler) signatures() *imageverify.Verifier {
	r.verifierOnce.Do(func() {
		if r.Signatures == nil {
			r.Signatures = NewSignatureVerifier(r.secrets(), r.Egress, r.PublicTrust)
		}
	})
	return r.Signatures
}

// isVerificationVerdict reports whether err refuses a revision's
// signature (which stalls) rather than failing to check it.
func isVerificationVerdict(err error) bool {
	var gerr *source.VerificationError
	var aerr *ArtifactVerificationError
	return errors.As(err, &gerr) || errors.As(err, &aerr)
}
