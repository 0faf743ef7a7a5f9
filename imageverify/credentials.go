package imageverify

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/authn/github"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	corev1 "k8s.io/api/core/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
)

// SecretReader reads the pull secrets a check names.
type SecretReader interface {
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// reference parses the image and returns the registry options of the
// check: its keychain and transport.
func (v *Verifier) reference(ctx context.Context, image string, creds loader.ImageCredentials) (name.Reference, []ociremote.Option, error) {
	ref, opts, err := v.remoteReference(ctx, image, creds)
	if err != nil {
		return nil, nil, err
	}
	return ref, []ociremote.Option{ociremote.WithRemoteOptions(opts...)}, nil
}

// remoteReference is reference for go-containerregistry's remote package:
// the image on the registry asked (the mirror, when set) and the options
// that reach it.
func (v *Verifier) remoteReference(ctx context.Context, image string, creds loader.ImageCredentials) (name.Reference, []remote.Option, error) {
	ref, err := name.ParseReference(image, v.nameOptions(creds)...)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid image reference %q: %w", image, err)
	}
	if v.o.Mirror != "" {
		mirrored := v.o.Mirror + "/" + ref.Context().RepositoryStr()
		if d, ok := ref.(name.Digest); ok {
			mirrored += "@" + d.DigestStr()
		} else {
			mirrored += ":" + ref.Identifier()
		}
		if ref, err = name.ParseReference(mirrored, v.nameOptions(creds)...); err != nil {
			return nil, nil, fmt.Errorf("invalid image reference %q on registry %s: %w", image, v.o.Mirror, err)
		}
	}
	kc, err := v.keychain(ctx, creds)
	if err != nil {
		return nil, nil, err
	}
	return ref, []remote.Option{
		remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(v.o.Transport),
		remote.WithUserAgent("charter"),
	}, nil
}

func (v *Verifier) nameOptions(creds loader.ImageCredentials) []name.Option {
	opts := []name.Option{name.WeakValidation}
	if v.o.Insecure || (creds.Registry != nil && creds.Registry.AllowInsecureRegistry) {
		opts = append(opts, name.Insecure)
	}
	return opts
}

// keychain resolves registry credentials as Kyverno does (§2.3): the Pod's
// imagePullSecrets (in its namespace) and the entry's secrets
// ("name" in the Pod's namespace or "namespace/name"), then the providers
// the entry names (default: the node's Docker config and its credential
// helpers; github: GITHUB_TOKEN), then anonymous access. A namespaced
// policy's secrets must be of its own namespace: charter reads them with
// its own identity, so another tenant's pull secret would otherwise
// authenticate this tenant's registry calls (and a registry of its
// choosing would receive the credentials).
func (v *Verifier) keychain(ctx context.Context, creds loader.ImageCredentials) (authn.Keychain, error) {
	var chains []authn.Keychain
	var refs [][2]string
	for _, s := range creds.PullSecrets {
		refs = append(refs, [2]string{creds.Namespace, s})
	}
	providers := []kyvernov1.ImageRegistryCredentialsProvider{"default"}
	if r := creds.Registry; r != nil {
		for _, s := range r.Secrets {
			if err := loader.CheckSecretScope(creds.Scope, creds.Namespace, s); err != nil {
				return nil, fmt.Errorf("failed to fetch secrets: %w", err)
			}
			ns, n, ok := strings.Cut(s, "/")
			if !ok {
				ns, n = creds.Namespace, s
			}
			refs = append(refs, [2]string{ns, n})
		}
		if len(r.Providers) > 0 {
			providers = r.Providers
		}
	}
	if len(refs) > 0 {
		if v.o.Secrets == nil {
			return nil, fmt.Errorf("failed to fetch secrets: no secret reader configured")
		}
		secrets := make([]corev1.Secret, 0, len(refs))
		for _, r := range refs {
			s, err := v.o.Secrets.Secret(ctx, r[0], r[1])
			if err != nil {
				return nil, fmt.Errorf("failed to fetch secrets: %s/%s: %w", r[0], r[1], err)
			}
			secrets = append(secrets, *s)
		}
		kc, err := kauth.NewFromPullSecrets(ctx, secrets)
		if err != nil {
			return nil, fmt.Errorf("failed to fetch secrets: %w", err)
		}
		chains = append(chains, kc)
	}
	for _, p := range providers {
		switch strings.ToLower(string(p)) {
		case "default":
			chains = append(chains, v.o.DefaultKeychain)
		case "github":
			chains = append(chains, github.Keychain)
		default:
			return nil, fmt.Errorf("registry credential provider %q is not built into charter (default and github are)", p)
		}
	}
	return authn.NewMultiKeychain(chains...), nil
}
