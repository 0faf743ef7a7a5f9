package clitest

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// FieldError is a decoding fault at a field path inside a document, e.g.
// `results[3].reslt: unknown field`.
type FieldError struct {
	Path  string
	Fault string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Fault
	}
	return e.Path + ": " + e.Fault
}

// decodeStrict decodes a document into out (a pointer) the way Kyverno's CLI
// decodes its files (yaml.UnmarshalStrict): unknown fields are errors, but
// keys match field names case-insensitively, as encoding/json does. Unlike
// encoding/json's own DisallowUnknownFields, the error carries the full
// path of the offending field.
func decodeStrict(d manifest.Document, out any) error {
	if err := checkKnownFields(d.Value, reflect.TypeOf(out).Elem(), ""); err != nil {
		return err
	}
	data, err := d.JSON()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &FieldError{Path: te.Field, Fault: fmt.Sprintf("cannot use %s as %s", te.Value, te.Type)}
		}
		return err
	}
	return nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkKnownFields walks a decoded JSON value alongside the Go type it will
// be decoded into and reports the first object key no field accepts. Types
// that decode themselves (json.Unmarshaler) are opaque and not checked.
func checkKnownFields(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil // a type mismatch: json.Unmarshal reports it
		}
		fields := fieldsOf(t)
		for key, child := range obj {
			f, ok := fields.lookup(key)
			if !ok {
				return &FieldError{Path: joinPath(path, key), Fault: "unknown field"}
			}
			if err := checkKnownFields(child, f.typ, joinPath(path, key)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, child := range list {
			if err := checkKnownFields(child, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for key, child := range obj {
			if err := checkKnownFields(child, t.Elem(), joinPath(path, key)); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

type structField struct {
	name string
	typ  reflect.Type
}

type structFields struct {
	exact map[string]structField
	list  []structField
}

// lookup finds the field for a key: an exact name first, then a
// case-insensitive match, which is encoding/json's rule.
func (fs *structFields) lookup(key string) (structField, bool) {
	if f, ok := fs.exact[key]; ok {
		return f, true
	}
	for _, f := range fs.list {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return structField{}, false
}

var fieldCache sync.Map // reflect.Type → *structFields

// fieldsOf lists the JSON fields of a struct type, flattening embedded
// structs the way encoding/json does.
func fieldsOf(t reflect.Type) *structFields {
	if cached, ok := fieldCache.Load(t); ok {
		return cached.(*structFields)
	}
	fs := &structFields{exact: map[string]structField{}}
	var collect func(reflect.Type)
	collect = func(t reflect.Type) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := sf.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				collect(ft)
				continue
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			f := structField{name: name, typ: sf.Type}
			fs.exact[name] = f
			fs.list = append(fs.list, f)
		}
	}
	collect(t)
	fieldCache.Store(t, fs)
	return fs
}
