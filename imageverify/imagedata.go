package imageverify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/charter-dev/charter/engine/loader"
)

var _ loader.ImageDataLoader = (*Verifier)(nil)

// imageData is a cached answer of ImageData.
type imageData map[string]any

// ImageData fetches what policies read of an image from its registry: the
// union of what `imageRegistry` context entries and the CEL libraries'
// image.GetMetadata / getImageData see, {image, resolvedImage, registry,
// repository, identifier, tag, digest, imageIndex (for an index),
// manifest, config and configData (the same config file)}. The manifest
// and config of an index are those of its linux/amd64 image, as in
// Kyverno.
//
// It reaches the registry exactly as verification does: the same
// credentials (creds' pull secrets, the node's credential helpers, the
// entry's providers), transport, mirror and time bound. A tag is resolved
// to its digest on every call and the data is cached by digest in the
// verifier's cache, so a moved tag never serves the old image's data.
func (v *Verifier) ImageData(ctx context.Context, image string, creds loader.ImageCredentials) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, v.o.Timeout)
	defer cancel()
	ref, err := name.ParseReference(image, v.nameOptions(creds)...)
	if err != nil {
		return nil, fmt.Errorf("invalid image reference %q: %w", image, err)
	}
	fetched, ropts, err := v.remoteReference(ctx, image, creds)
	if err != nil {
		return nil, err
	}
	digest := ""
	if d, ok := fetched.(name.Digest); ok {
		digest = d.DigestStr()
	} else {
		desc, err := remote.Head(fetched, ropts...)
		if err != nil {
			return nil, classify(registryError(image, err))
		}
		digest = desc.Digest.String()
	}
	key := "data;" + ref.Context().Name() + "@" + digest
	if v.cache != nil {
		if cached, ok := v.cache.get(key, time.Time{}); ok {
			if data, ok := cached.(imageData); ok {
				return v.describe(image, ref, digest, data), nil
			}
		}
	}
	out, err, _ := v.flight.Do(key, func() (any, error) {
		data, err := fetchImageData(fetched.Context().Digest(digest), ropts)
		if err != nil {
			return nil, classify(registryError(image, err))
		}
		if v.cache != nil {
			v.cache.put(key, data)
		}
		return data, nil
	})
	if err != nil {
		return nil, err
	}
	return v.describe(image, ref, digest, out.(imageData)), nil
}

// describe is the answer for image: the fetched (shared, never modified)
// data copied, with the names of the reference as the policy wrote it.
func (v *Verifier) describe(image string, ref name.Reference, digest string, data imageData) map[string]any {
	out := runtime.DeepCopyJSON(data)
	tag := ""
	if t, ok := ref.(name.Tag); ok {
		tag = t.TagStr()
	}
	out["image"] = image
	out["resolvedImage"] = ref.Context().Name() + "@" + digest
	out["registry"] = ref.Context().RegistryStr()
	out["repository"] = ref.Context().RepositoryStr()
	out["identifier"] = ref.Identifier()
	out["tag"] = tag
	out["digest"] = digest
	return out
}

// fetchImageData reads the manifest (of the linux/amd64 image of an
// index) and the config file.
func fetchImageData(ref name.Digest, opts []remote.Option) (imageData, error) {
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, err
	}
	out := imageData{"imageIndex": nil}
	if desc.MediaType.IsIndex() {
		var index any
		if err := json.Unmarshal(desc.Manifest, &index); err != nil {
			return nil, fmt.Errorf("image index: %w", err)
		}
		out["imageIndex"] = index
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	var manifest, config any
	if err := json.Unmarshal(rawManifest, &manifest); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := json.Unmarshal(rawConfig, &config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// configData for imageRegistry context entries, config for the CEL
	// libraries: the same document (DeepCopyJSON copies each).
	out["manifest"], out["config"], out["configData"] = manifest, config, config
	return out, nil
}

func registryError(image string, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return fmt.Errorf("image %s not found: %w", image, err)
	}
	return err
}
