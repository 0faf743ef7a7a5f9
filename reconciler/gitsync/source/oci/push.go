package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Archive returns dir as a gzipped tarball in Flux's layout: paths
// relative to dir, folders and regular files only, without .git, and
// without times or owners, so the same tree gives the same bytes. A link
// is refused rather than skipped: the extracted tree would miss what it
// pointed at.
func Archive(dir string) ([]byte, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a folder", dir)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		case d.Type().IsRegular():
		default:
			return fmt.Errorf("%s is not a regular file or folder (%s): an artifact holds no links", p, d.Type())
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, fi.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Image returns the artifact of a tarball in Flux's format: an OCI image
// manifest with Flux's config media type, the tarball as its one layer and
// annotations (AnnotationSource, AnnotationRevision, AnnotationCreated).
func Image(tarball []byte, annotations map[string]string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(tarball, ContentMediaType)})
	if err != nil {
		return nil, err
	}
	if len(annotations) > 0 {
		img = mutate.Annotations(img, annotations).(v1.Image)
	}
	return img, nil
}

// Push writes img under tag (by its digest alone when tag is empty) and
// returns its manifest digest.
func (r *Remote) Push(ctx context.Context, tag string, img v1.Image) (v1.Hash, error) {
	d, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	var ref name.Reference = r.repo.Digest(d.String())
	if tag != "" {
		ref = r.repo.Tag(tag)
	}
	if err := remote.Write(ref, img, r.options(ctx)...); err != nil {
		return v1.Hash{}, r.fail("push to", err)
	}
	return d, nil
}
