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
	"os"

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
// each. Documents holding only comments or whitespace are dropped.
// A document that is a List (kind: List, or any kind ending in "List" with an
// items array) is not expanded here: see Items.
func Split(data []byte, source string) ([]Document, error) {
	var docs []Document
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
		value, err := decodeYAML(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Document{Source: source, Index: index}.Where(), err)
		}
		if value == nil {
			continue
		}
		docs = append(docs, Document{Source: source, Index: index, Value: value})
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
