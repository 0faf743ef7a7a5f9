package oci

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/charter-dev/charter/reconciler/gitsync/source"
)

// tarOverhead is what a tarball may hold beyond its files' bytes: 512
// bytes of header per entry and the end-of-archive blocks. Extract stops
// reading a decompressed stream longer than the files it may hold plus
// this, so a gzip bomb of padding is cut short too.
const tarOverhead = 1024

// Extract writes the gzipped tarball read from r into dir, which must
// exist. Only folders and regular files are written, each inside dir
// (written through an os.Root, so nothing can lead out of it); a link, a
// device, an absolute path or one with ".." is an *ArtifactError, and more
// bytes or files than limits allow a *source.LimitError. File modes are
// not taken from the tarball: files are 0644, folders 0755.
func Extract(r io.Reader, dir string, limits source.Limits) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return &ArtifactError{Msg: fmt.Sprintf("layer is not gzip: %v", err)}
	}
	defer zr.Close()
	var stream io.Reader = zr
	counted := &countingReader{r: zr}
	if limits.MaxSize > 0 {
		budget := limits.MaxSize + tarOverhead
		if limits.MaxFiles > 0 {
			budget += int64(limits.MaxFiles+1) * tarOverhead
		}
		counted.limit = budget
		stream = counted
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()

	tr := tar.NewReader(stream)
	var size, files int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if counted.over {
				return &source.LimitError{What: "bytes", Limit: limits.MaxSize, Found: counted.n}
			}
			return &ArtifactError{Msg: fmt.Sprintf("tarball: %v", err)}
		}
		rel, err := entryPath(hdr.Name)
		if err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeXGlobalHeader:
			continue
		case tar.TypeDir:
			if rel == "." {
				continue
			}
			if err := root.MkdirAll(rel, 0o755); err != nil {
				return &ArtifactError{Msg: fmt.Sprintf("folder %s: %v", hdr.Name, err)}
			}
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return &ArtifactError{Msg: fmt.Sprintf("%s is a link to %s: charter extracts no links (flux push and charter push write none)", hdr.Name, hdr.Linkname)}
		default:
			return &ArtifactError{Msg: fmt.Sprintf("%s is not a file or a folder (tar type %q)", hdr.Name, hdr.Typeflag)}
		}
		if rel == "." {
			return &ArtifactError{Msg: fmt.Sprintf("file entry %q names the folder itself", hdr.Name)}
		}
		files++
		if limits.MaxFiles > 0 && files > int64(limits.MaxFiles) {
			return &source.LimitError{What: "files", Limit: int64(limits.MaxFiles), Found: files}
		}
		size += hdr.Size
		if limits.MaxSize > 0 && size > limits.MaxSize {
			return &source.LimitError{What: "bytes", Limit: limits.MaxSize, Found: size}
		}
		if d := path.Dir(rel); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return &ArtifactError{Msg: fmt.Sprintf("folder of %s: %v", hdr.Name, err)}
			}
		}
		if err := writeFile(root, rel, tr, hdr.Size); err != nil {
			if counted.over {
				return &source.LimitError{What: "bytes", Limit: limits.MaxSize, Found: counted.n}
			}
			return &ArtifactError{Msg: fmt.Sprintf("%s: %v", hdr.Name, err)}
		}
	}
}

// entryPath is a tar entry's name as a slash path inside the folder.
func entryPath(name string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if name == "" || strings.Contains(name, `\`) || !filepath.IsLocal(filepath.FromSlash(clean)) && clean != "." {
		return "", &ArtifactError{Msg: fmt.Sprintf("entry %q leads outside the folder", name)}
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", &ArtifactError{Msg: fmt.Sprintf("entry %q leads outside the folder", name)}
		}
	}
	return clean, nil
}

func writeFile(root *os.Root, rel string, r io.Reader, size int64) error {
	f, err := root.OpenFile(rel, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("wrote %d of %d bytes", n, size)
	}
	return err
}

// countingReader counts what it reads and fails past limit (none when 0).
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	over  bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.limit > 0 && c.n > c.limit {
		c.over = true
		return n, errors.New("decompressed stream over the limit")
	}
	return n, err
}
