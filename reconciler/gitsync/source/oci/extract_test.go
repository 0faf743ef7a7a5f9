package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charter-dev/charter/reconciler/gitsync/source"
)

// entry is one tar entry of a test tarball.
type entry struct {
	name, body, link string
	typ              byte
	// size, when set, is the declared size (a lie when it differs from
	// len(body)).
	size int64
}

func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		size := int64(len(e.body))
		if typ != tar.TypeReg {
			size = 0
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Size: size, Mode: 0o600}); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestExtractRefuses: every way out of the folder, every link and every
// tarball over the limits is refused, with what and where; nothing is
// written outside the folder.
func TestExtractRefuses(t *testing.T) {
	limits := source.Limits{MaxSize: 1 << 10, MaxFiles: 3}
	tests := []struct {
		name    string
		entries []entry
		// artifact is a substring of the *ArtifactError; limit the
		// LimitError's What.
		artifact, limit string
	}{
		{"parent path", []entry{{name: "../escaped.yaml", body: "x"}}, `entry "../escaped.yaml" leads outside the folder`, ""},
		{"parent inside path", []entry{{name: "a/../../escaped.yaml", body: "x"}}, `leads outside the folder`, ""},
		{"dot-dot that cleans inside", []entry{{name: "a/../b.yaml", body: "x"}}, `leads outside the folder`, ""},
		{"absolute path", []entry{{name: "/etc/escaped.yaml", body: "x"}}, `entry "/etc/escaped.yaml" leads outside the folder`, ""},
		{"symlink out", []entry{{name: "link", typ: tar.TypeSymlink, link: "/etc"}}, "link is a link to /etc: charter extracts no links", ""},
		{"symlink in", []entry{{name: "a.yaml", body: "x"}, {name: "b.yaml", typ: tar.TypeSymlink, link: "a.yaml"}}, "b.yaml is a link to a.yaml", ""},
		{"hard link", []entry{{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}}, "charter extracts no links", ""},
		{"device", []entry{{name: "dev", typ: tar.TypeChar}}, "dev is not a file or a folder", ""},
		{"backslash", []entry{{name: `..\escaped.yaml`, body: "x"}}, "leads outside the folder", ""},
		{"too many files", []entry{{name: "1", body: "x"}, {name: "2", body: "x"}, {name: "3", body: "x"}, {name: "4", body: "x"}}, "", "files"},
		{"too many bytes", []entry{{name: "big", body: strings.Repeat("x", 2<<10)}}, "", "bytes"},
		{"too many bytes in sum", []entry{{name: "a", body: strings.Repeat("x", 600)}, {name: "b", body: strings.Repeat("x", 600)}}, "", "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "tree")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			err := Extract(bytes.NewReader(tarball(t, tt.entries...)), dir, limits)
			var aerr *ArtifactError
			var lerr *source.LimitError
			switch {
			case tt.artifact != "":
				if !errors.As(err, &aerr) || !strings.Contains(err.Error(), tt.artifact) {
					t.Fatalf("got %v, want an ArtifactError saying %q", err, tt.artifact)
				}
			default:
				if !errors.As(err, &lerr) || lerr.What != tt.limit {
					t.Fatalf("got %v, want a LimitError on %s", err, tt.limit)
				}
			}
			if _, err := os.Lstat(filepath.Join(parent, "escaped.yaml")); !os.IsNotExist(err) {
				t.Errorf("a file was written outside the folder: %v", err)
			}
		})
	}
}

// TestExtractWrites: folders and files land under the folder with fixed
// modes, whatever the tarball says.
func TestExtractWrites(t *testing.T) {
	dir := t.TempDir()
	data := tarball(t,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "policies/", typ: tar.TypeDir},
		entry{name: "policies/require-labels.yaml", body: "kind: ClusterPolicy\n"},
		entry{name: "./environments/prod/kustomization.yaml", body: "resources: []\n"},
	)
	if err := Extract(bytes.NewReader(data), dir, source.Limits{MaxSize: 1 << 10, MaxFiles: 2}); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"policies/require-labels.yaml":         "kind: ClusterPolicy\n",
		"environments/prod/kustomization.yaml": "resources: []\n",
	} {
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", file, got, err, want)
		}
		info, _ := os.Stat(filepath.Join(dir, file))
		if info.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", file, info.Mode().Perm())
		}
	}
}
