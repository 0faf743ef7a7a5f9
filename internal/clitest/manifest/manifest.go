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
	"sigs.k8s.io/yaml"
)

// Document is one YAML document of a file, converted to JSON.
type Document struct {
	// Source is the file the document came from ("-" for stdin).
	Source string
	// Index is the position of the document in its file, counting from 0
	// and skipping nothing, so "document 2" in an error message is the third
	// `---` section the user sees.
	Index int
	// JSON is the document as JSON; never empty or "null".
	JSON []byte
}

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
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	_ = json.Unmarshal(d.JSON, &tm)
	return tm.APIVersion, tm.Kind
}

// Object decodes the document as a generic object.
func (d Document) Object() (map[string]any, error) {
	var obj map[string]any
	if err := json.Unmarshal(d.JSON, &obj); err != nil {
		return nil, fmt.Errorf("%s: not an object: %w", d.Where(), err)
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

// Split cuts YAML (or JSON) data into documents at `---` lines and converts
// each to JSON. Documents holding only comments or whitespace are dropped.
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
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Document{Source: source, Index: index}.Where(), err)
		}
		js = bytes.TrimSpace(js)
		if len(js) == 0 || string(js) == "null" {
			continue
		}
		docs = append(docs, Document{Source: source, Index: index, JSON: js})
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
