// Package manifest reads the files `charter test` and `charter apply` are
// given: multi-document YAML (or JSON) holding Kubernetes objects, Kyverno
// policies and CLI test documents. It knows nothing about what the objects
// mean beyond their apiVersion and kind.
package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Document is one YAML document of a file, decoded.
type Document struct {
	// Source is the file the document came from ("-" for stdin).
	Source string
	// Index is the position of the document in its file, counting from 0
	// and skipping nothing, so "document 2" in an error message is the third
	// `---` section the user sees.
	Index int
	// Value is the document as encoding/json would decode its JSON form:
	// map[string]any, []any, string, float64, bool. Never nil.
	Value any
}

// JSON encodes the document as JSON.
func (d Document) JSON() ([]byte, error) { return json.Marshal(d.Value) }

// Where names the document for error messages: "file.yaml" or
// "file.yaml (document 3)".
func (d Document) Where() string {
	if d.Index == 0 {
		return d.Source
	}
	return fmt.Sprintf("%s (document %d)", d.Source, d.Index+1)
}

// TypeMeta reads apiVersion and kind from the document.
func (d Document) TypeMeta() (apiVersion, kind string) {
	obj, _ := d.Value.(map[string]any)
	apiVersion, _ = obj["apiVersion"].(string)
	kind, _ = obj["kind"].(string)
	return apiVersion, kind
}

// Object decodes the document as a generic object.
func (d Document) Object() (map[string]any, error) {
	obj, ok := d.Value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: not an object", d.Where())
	}
	return obj, nil
}

// ReadFile reads every non-empty document of a file.
func ReadFile(path string) ([]Document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Split(data, path)
}

// Read reads every non-empty document from r; source names it in errors.
func Read(r io.Reader, source string) ([]Document, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return Split(data, source)
}

// Split cuts YAML (or JSON) data into documents at `---` lines and decodes
// each. Documents holding only comments or whitespace are dropped. A
// document that is a List is not expanded here: see Objects.
func Split(data []byte, source string) ([]Document, error) {
	raws, err := SplitRaw(data, source)
	if err != nil {
		return nil, err
	}
	docs := make([]Document, 0, len(raws))
	for _, raw := range raws {
		d, err := raw.Decode()
		if err != nil {
			return nil, err
		}
		if d.Value != nil {
			docs = append(docs, d)
		}
	}
	return docs, nil
}

// RawDocument is one undecoded YAML document of a file. Splitting is cheap
// and sequential; decoding is the expensive part and may run concurrently.
type RawDocument struct {
	Source string
	Index  int
	YAML   []byte
}

// Decode parses the document. A document that holds only null gives a
// Document with a nil Value.
func (r RawDocument) Decode() (Document, error) {
	d := Document{Source: r.Source, Index: r.Index}
	value, err := decodeYAML(r.YAML)
	if err != nil {
		return d, fmt.Errorf("%s: %w", d.Where(), err)
	}
	d.Value = value
	return d, nil
}

// SplitRaw cuts data into documents at `---` lines without decoding them,
// dropping documents that hold only comments or whitespace.
func SplitRaw(data []byte, source string) ([]RawDocument, error) {
	var docs []RawDocument
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for index := 0; ; index++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if isBlank(raw) {
			continue
		}
		docs = append(docs, RawDocument{Source: source, Index: index, YAML: raw})
	}
}

// isBlank reports whether a YAML document holds nothing but comments,
// whitespace and document markers.
func isBlank(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' || bytes.Equal(line, []byte("---")) || bytes.Equal(line, []byte("...")) {
			continue
		}
		return false
	}
	return true
}

// Files expands paths into manifest files: a directory contributes every
// .yaml, .yml and .json file below it, in lexical order, skipping hidden
// directories (.git, .kyverno-test, .chainsaw-test hold tests, not
// manifests); a file and "-" (stdin) stand for themselves. Each file is
// listed once.
func Files(paths []string) ([]string, error) {
	var files []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	for _, root := range paths {
		if root == "-" {
			add(root)
			continue
		}
		info, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			add(filepath.Clean(root))
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if strings.HasPrefix(d.Name(), ".") && p != root {
					return filepath.SkipDir
				}
				return nil
			}
			switch filepath.Ext(p) {
			case ".yaml", ".yml", ".json":
				add(p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}
