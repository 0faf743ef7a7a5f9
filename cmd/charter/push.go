package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/charter-dev/charter/reconciler/gitsync"
	"github.com/charter-dev/charter/reconciler/gitsync/source"
	"github.com/charter-dev/charter/reconciler/gitsync/source/oci"
)

func newPushCommand() *cobra.Command {
	var (
		dir, sourceURL, revision, key string
		sign, insecure                bool
	)
	cmd := &cobra.Command{
		Use:   "push oci://REGISTRY/REPOSITORY:TAG --path DIR",
		Short: "Push a folder of policies as an OCI artifact in Flux's format, optionally signed with cosign",
		Long: `Push a folder as an OCI artifact in Flux's format (as flux push artifact
does): an image manifest with config media type
application/vnd.cncf.flux.config.v1+json and one layer, a gzipped tarball
of the folder (application/vnd.cncf.flux.content.v1.tar+gzip), annotated
with org.opencontainers.image.source, .revision and .created. A
PolicyRepository with spec.url oci://REGISTRY/REPOSITORY syncs it, and so
does Flux's OCIRepository.

The tarball holds the folder's files with paths relative to it (.git
left out; a symbolic link is refused, as charter extracts none). An
overlay that refers to folders above it (environments/prod with
resources: [../../policies]) needs its parent pushed: --path . and the
PolicyRepository's spec.path environments/prod.

Credentials are the Docker config's (docker login). --sign --key signs
the pushed digest as cosign sign --key --tlog-upload=false does (the
password of a cosign key comes from COSIGN_PASSWORD); a PolicyRepository
whose spec.verify holds the public key then applies only what this key
signed. The digest is printed on stdout.`,
		Example: `  charter push oci://ghcr.io/example/policies:v1.2.0 --path . \
    --source https://github.com/example/policies --revision "main@sha1:$(git rev-parse HEAD)"
  COSIGN_PASSWORD=… charter push oci://ghcr.io/example/policies:v1.2.0 --path . --sign --key cosign.key`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sign != (key != "") {
				return fmt.Errorf("--sign and --key go together: --sign --key cosign.key")
			}
			repo, ref, err := oci.ParseURL(args[0], false)
			if err != nil {
				return err
			}
			tag := oci.DefaultTag
			if ref != nil {
				if _, isTag := ref.(interface{ TagStr() string }); !isTag {
					return fmt.Errorf("%s: push to a tag (oci://REGISTRY/REPOSITORY:TAG), not a digest", args[0])
				}
				tag = ref.Identifier()
			}
			remote, err := oci.NewRemoteOf(repo, oci.WithInsecure(insecure), oci.WithKeychain(authn.DefaultKeychain))
			if err != nil {
				return err
			}
			// The key is read before anything is pushed: a wrong password
			// must not leave an unsigned artifact under the tag.
			var signer signature.Signer
			if sign {
				keyPEM, err := os.ReadFile(key)
				if err != nil {
					return fmt.Errorf("--key: %w", err)
				}
				if signer, err = oci.LoadSigningKey(keyPEM, []byte(os.Getenv("COSIGN_PASSWORD"))); err != nil {
					return fmt.Errorf("--key %s: %w", key, err)
				}
			}
			data, err := oci.Archive(dir)
			if err != nil {
				return fmt.Errorf("--path %s: %w", dir, err)
			}
			annotations := map[string]string{oci.AnnotationCreated: time.Now().UTC().Format(time.RFC3339)}
			if sourceURL != "" {
				annotations[oci.AnnotationSource] = sourceURL
			}
			if revision != "" {
				annotations[oci.AnnotationRevision] = revision
			}
			img, err := oci.Image(data, annotations)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			digest, err := remote.Push(ctx, tag, img)
			if err != nil {
				return err
			}
			if signer != nil {
				if err := remote.Sign(ctx, digest.String(), signer); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), remote.String()+":"+tag+"@"+digest.String())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "path", "", "folder to push (required)")
	f.StringVar(&sourceURL, "source", "", "where the folder comes from, e.g. the Git URL (annotation org.opencontainers.image.source)")
	f.StringVar(&revision, "revision", "", "which revision of the source, e.g. main@sha1:<commit> (annotation org.opencontainers.image.revision)")
	f.BoolVar(&sign, "sign", false, "sign the pushed digest with cosign (needs --key)")
	f.StringVar(&key, "key", "", "cosign private key file to sign with (cosign generate-key-pair; password from COSIGN_PASSWORD)")
	f.BoolVar(&insecure, "insecure", false, "push over plain HTTP (a loopback registry only)")
	_ = cmd.MarkFlagRequired("path")
	return cmd
}

// pullArtifacts replaces each oci:// argument with a temporary folder
// holding its artifact (tag "latest" when the URL names none), pulled by
// the digest its tag resolves to, within gitsync's default limits: so
// charter test runs against exactly the artifact a PolicyRepository would
// apply. The returned function removes the folders.
func pullArtifacts(ctx context.Context, args []string, insecure bool) ([]string, func(), error) {
	var dirs []string
	cleanup := func() {
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if !strings.HasPrefix(a, "oci://") {
			continue
		}
		repo, ref, err := oci.ParseURL(a, false)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		want := oci.Ref{Tag: oci.DefaultTag}
		if ref != nil {
			if _, isTag := ref.(interface{ TagStr() string }); isTag {
				want = oci.Ref{Tag: ref.Identifier()}
			} else {
				want = oci.Ref{Digest: ref.Identifier()}
			}
		}
		remote, err := oci.NewRemoteOf(repo, oci.WithInsecure(insecure), oci.WithKeychain(authn.DefaultKeychain))
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		rev, err := remote.Resolve(ctx, want)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		dir, err := os.MkdirTemp("", "charter-test-oci-")
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		dirs = append(dirs, dir)
		limits := source.Limits{MaxSize: gitsync.DefaultMaxRepositorySize, MaxFiles: gitsync.DefaultMaxFiles}
		if _, err := remote.Pull(ctx, rev, dir, limits); err != nil {
			cleanup()
			return nil, nil, err
		}
		out[i] = dir
	}
	return out, cleanup, nil
}
