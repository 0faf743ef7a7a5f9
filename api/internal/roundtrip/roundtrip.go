// Package roundtrip checks that decoding a manifest into charter's Go types
// and encoding it again loses nothing. The API packages' tests use it on the
// conformance corpus.
//
// "Nothing lost" means, precisely:
//
//  1. Decoding is strict: a field the types do not know is an error.
//  2. Every free-form value (an apiextensionsv1.JSON field: patterns, data,
//     conditions, ...) comes back exactly as given, including nulls, empty
//     maps and empty lists inside it.
//  3. Everything else comes back equal after both sides are normalised by
//     dropping map entries whose value is null, false, 0, "", {} or [] (after
//     normalising that value in turn). Typed fields treat such a value and
//     an absent field alike (Kyverno's own types use omitempty the same
//     way), so e.g. `synchronize: false` may be dropped; a non-zero value
//     never may, and nothing non-zero may appear that was not given.
//
// The zero values dropped or added are reported so a change in them shows.
package roundtrip

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/charter-dev/charter/api/strict"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Document is one YAML document of a file.
type Document struct {
	File       string
	Index      int // position in the file, from 0
	APIVersion string
	Kind       string
	YAML       []byte
}

func (d Document) String() string { return fmt.Sprintf("%s#%d (%s)", d.File, d.Index, d.Kind) }

// FindModuleRoot returns the nearest folder at or above dir holding go.mod.
func FindModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ConformanceDir returns the path of the shared conformance corpus, which
// lives beside the repository at ../shared/conformance.
func ConformanceDir() (string, error) {
	root, err := FindModuleRoot(".")
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(root), "shared", "conformance"), nil
}

// ReadDocuments returns every YAML document of every .yaml/.yml file under
// dir, in path order. Documents that are not objects are skipped; a file
// that is not valid YAML is an error.
func ReadDocuments(dir string) ([]Document, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var docs []Document
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		fileDocs, err := SplitDocuments(file, data)
		if err != nil {
			return nil, err
		}
		docs = append(docs, fileDocs...)
	}
	return docs, nil
}

// SplitDocuments splits a multi-document YAML file.
func SplitDocuments(file string, data []byte) ([]Document, error) {
	reader := yamlutil.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []Document
	for i := 0; ; i++ {
		raw, err := reader.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(raw, &meta); err != nil {
			// Not an object (a comment-only document, a list, a scalar).
			continue
		}
		docs = append(docs, Document{File: file, Index: i, APIVersion: meta.APIVersion, Kind: meta.Kind, YAML: raw})
	}
}

// Result is what a round trip observed.
type Result struct {
	// Dropped are paths of zero values given but not re-encoded.
	Dropped []string
	// Added are paths of zero values re-encoded but not given.
	Added []string
	// FreeForm is the number of free-form values compared exactly.
	FreeForm int
}

// Check decodes doc strictly into obj (a pointer to a zero value of the
// type), encodes it again and compares as described in the package doc.
func Check(doc []byte, obj any) (Result, error) {
	var res Result
	if err := strict.Unmarshal(doc, obj); err != nil {
		return res, fmt.Errorf("strict decode: %w", err)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return res, fmt.Errorf("encode: %w", err)
	}
	var given, got any
	if err := yaml.Unmarshal(doc, &given); err != nil {
		return res, err
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return res, err
	}

	// 2. Free-form values come back exactly.
	for _, ff := range freeFormValues(reflect.ValueOf(obj), nil) {
		res.FreeForm++
		var decoded any
		if err := json.Unmarshal(ff.raw, &decoded); err != nil {
			return res, fmt.Errorf("%s: stored free-form value is not JSON: %w", ff.path, err)
		}
		in, ok := lookup(given, ff.path)
		if !ok {
			return res, fmt.Errorf("%s: free-form value decoded from nowhere", ff.path)
		}
		if !reflect.DeepEqual(in, decoded) {
			return res, fmt.Errorf("%s: free-form value changed:\n given: %s\n kept:  %s", ff.path, mustJSON(in), ff.raw)
		}
		if outVal, ok := lookup(got, ff.path); !ok || !reflect.DeepEqual(in, outVal) {
			return res, fmt.Errorf("%s: free-form value not re-encoded as given:\n given: %s\n encoded: %s", ff.path, mustJSON(in), mustJSON(outVal))
		}
	}

	// 3. Everything else is equal up to zero values.
	res.Dropped = zeroPaths(given, got, "")
	res.Added = zeroPaths(got, given, "")
	a, b := Normalize(given), Normalize(got)
	if !reflect.DeepEqual(a, b) {
		return res, fmt.Errorf("re-encoded object differs: %s", firstDifference(a, b, ""))
	}
	return res, nil
}

// Normalize drops map entries whose value is null, false, 0, "", {} or [],
// after normalising that value. List elements are normalised but kept, as
// their positions matter.
func Normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			x = Normalize(x)
			if !isZero(x) {
				out[k] = x
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = Normalize(x)
		}
		return out
	default:
		return v
	}
}

func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case float64:
		return v == 0
	case int64:
		return v == 0
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// zeroPaths lists the paths of entries of a missing from b (whose values
// are necessarily zero once the Normalize comparison passed).
func zeroPaths(a, b any, path string) []string {
	var out []string
	switch a := a.(type) {
	case map[string]any:
		bm, _ := b.(map[string]any)
		for _, k := range sortedKeys(a) {
			p := path + "." + k
			bv, ok := bm[k]
			if !ok {
				if isZero(Normalize(a[k])) {
					out = append(out, p)
				}
				continue
			}
			out = append(out, zeroPaths(a[k], bv, p)...)
		}
	case []any:
		bl, _ := b.([]any)
		for i := range a {
			if i < len(bl) {
				out = append(out, zeroPaths(a[i], bl[i], path+"["+strconv.Itoa(i)+"]")...)
			}
		}
	}
	return out
}

func firstDifference(a, b any, path string) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: given an object, encoded %s", path, mustJSON(b))
		}
		for _, k := range sortedKeys(av) {
			if _, ok := bv[k]; !ok {
				return fmt.Sprintf("%s.%s: given %s, lost", path, k, mustJSON(av[k]))
			}
			if !reflect.DeepEqual(av[k], bv[k]) {
				return firstDifference(av[k], bv[k], path+"."+k)
			}
		}
		for _, k := range sortedKeys(bv) {
			if _, ok := av[k]; !ok {
				return fmt.Sprintf("%s.%s: not given, encoded %s", path, k, mustJSON(bv[k]))
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return fmt.Sprintf("%s: given %s, encoded %s", path, mustJSON(a), mustJSON(b))
		}
		for i := range av {
			if !reflect.DeepEqual(av[i], bv[i]) {
				return firstDifference(av[i], bv[i], path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	return fmt.Sprintf("%s: given %s, encoded %s", path, mustJSON(a), mustJSON(b))
}

type freeForm struct {
	path pathT
	raw  []byte
}

type pathT []any // string keys and int indexes

func (p pathT) String() string {
	var b strings.Builder
	for _, s := range p {
		switch s := s.(type) {
		case string:
			b.WriteString("." + s)
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
		}
	}
	return b.String()
}

var jsonType = reflect.TypeFor[apiextv1.JSON]()

// freeFormValues finds every non-nil apiextv1.JSON in v, with its path in
// the object's JSON form.
func freeFormValues(v reflect.Value, path pathT) []freeForm {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return freeFormValues(v.Elem(), path)
	case reflect.Struct:
		if v.Type() == jsonType {
			raw := v.Interface().(apiextv1.JSON).Raw
			if raw == nil {
				return nil
			}
			return []freeForm{{path: append(pathT(nil), path...), raw: raw}}
		}
		var out []freeForm
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
				out = append(out, freeFormValues(v.Field(i), path)...)
				continue
			}
			if name == "" {
				name = f.Name
			}
			out = append(out, freeFormValues(v.Field(i), append(path, name))...)
		}
		return out
	case reflect.Slice, reflect.Array:
		var out []freeForm
		for i := 0; i < v.Len(); i++ {
			out = append(out, freeFormValues(v.Index(i), append(path, i))...)
		}
		return out
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return nil
		}
		var out []freeForm
		iter := v.MapRange()
		for iter.Next() {
			out = append(out, freeFormValues(iter.Value(), append(path, iter.Key().String()))...)
		}
		return out
	}
	return nil
}

func lookup(v any, path pathT) (any, bool) {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[s]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || s >= len(l) {
				return nil, false
			}
			v = l[s]
		}
	}
	return v, true
}

func sortedKeys(m map[string]any) []string {
	keys := slices.Sorted(maps.Keys(m))
	return keys
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(data)
}
