package server

import (
	"strings"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// decodeUnstructuredReview fills into from body as json.Unmarshal would,
// through jsonValues: the resource handlers' review, whose objects are the
// bulk of every request. The envelope is read field by field, straight
// into the struct. It reports false, leaving into to be reset and decoded
// by encoding/json, whenever the body is not the plain shape the API
// server sends: malformed JSON, a field of an unexpected type, a field
// given twice, or a key encoding/json would match to a field only
// case-insensitively.
func decodeUnstructuredReview(body []byte, into *unstructuredReview) bool {
	d := newJSONValues(body)
	defer d.release()
	ok := d.fields(reviewFields, func(i int) bool {
		switch i {
		case 0:
			return d.stringField(&into.APIVersion)
		case 1:
			return d.stringField(&into.Kind)
		default:
			if d.null() {
				return true
			}
			into.Request = &admissionRequest[map[string]any]{}
			return d.request(into.Request)
		}
	})
	if !ok {
		return false
	}
	d.skipSpace()
	return d.pos == len(d.data)
}

var (
	reviewFields  = []string{"apiVersion", "kind", "request"}
	requestFields = []string{"uid", "kind", "resource", "subResource", "requestKind", "requestResource",
		"requestSubResource", "name", "namespace", "operation", "userInfo", "object", "oldObject", "dryRun", "options"}
	optionsFields  = []string{"fieldManager"}
	userInfoFields = []string{"username", "uid", "groups", "extra"}
	gvkFields      = []string{"group", "version", "kind"}
	gvrFields      = []string{"group", "version", "resource"}
)

func (d *jsonValues) request(r *admissionRequest[map[string]any]) bool {
	return d.fields(requestFields, func(i int) bool {
		switch requestFields[i] {
		case "uid":
			var s string
			ok := d.stringField(&s)
			r.UID = types.UID(s)
			return ok
		case "kind":
			return d.gvk(&r.Kind)
		case "resource":
			return d.gvr(&r.Resource)
		case "subResource":
			return d.stringField(&r.SubResource)
		case "requestKind":
			if d.null() {
				return true
			}
			r.RequestKind = &metav1.GroupVersionKind{}
			return d.gvk(r.RequestKind)
		case "requestResource":
			if d.null() {
				return true
			}
			r.RequestResource = &metav1.GroupVersionResource{}
			return d.gvr(r.RequestResource)
		case "requestSubResource":
			return d.stringField(&r.RequestSubResource)
		case "name":
			return d.stringField(&r.Name)
		case "namespace":
			return d.stringField(&r.Namespace)
		case "operation":
			var s string
			ok := d.stringField(&s)
			r.Operation = admissionv1.Operation(s)
			return ok
		case "userInfo":
			return d.userInfo(&r.UserInfo)
		case "object":
			return d.objectField(&r.Object)
		case "oldObject":
			return d.objectField(&r.OldObject)
		case "options":
			if d.null() {
				return true
			}
			r.Options = &requestOptions{}
			return d.fields(optionsFields, func(int) bool { return d.stringField(&r.Options.FieldManager) })
		default: // dryRun
			if d.null() {
				return true
			}
			var b bool
			switch {
			case d.literal("true"):
				b = true
			case d.literal("false"):
			default:
				return false
			}
			r.DryRun = &b
			return true
		}
	})
}

func (d *jsonValues) userInfo(u *authenticationv1.UserInfo) bool {
	return d.fields(userInfoFields, func(i int) bool {
		switch i {
		case 0:
			return d.stringField(&u.Username)
		case 1:
			return d.stringField(&u.UID)
		case 2:
			return d.stringsField(&u.Groups)
		default:
			v, ok := d.value()
			if !ok {
				return false
			}
			if v == nil {
				return true
			}
			m, ok := v.(map[string]any)
			if !ok {
				return false
			}
			u.Extra = make(map[string]authenticationv1.ExtraValue, len(m))
			for k, e := range m {
				values, ok := stringList(e)
				if !ok {
					return false
				}
				u.Extra[k] = values
			}
			return true
		}
	})
}

func (d *jsonValues) gvk(out *metav1.GroupVersionKind) bool {
	return d.fields(gvkFields, func(i int) bool {
		switch i {
		case 0:
			return d.stringField(&out.Group)
		case 1:
			return d.stringField(&out.Version)
		}
		return d.stringField(&out.Kind)
	})
}

func (d *jsonValues) gvr(out *metav1.GroupVersionResource) bool {
	return d.fields(gvrFields, func(i int) bool {
		switch i {
		case 0:
			return d.stringField(&out.Group)
		case 1:
			return d.stringField(&out.Version)
		}
		return d.stringField(&out.Resource)
	})
}

// fields reads the object at d.pos (or null, which leaves every field
// alone) into a struct: for each key that is one of names, field is called
// with its index to read the value. Keys encoding/json ignores are
// skipped. A name given twice, or a key encoding/json might match to a
// field regardless of case, fails.
func (d *jsonValues) fields(names []string, field func(i int) bool) bool {
	d.skipSpace()
	if d.null() {
		return true
	}
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return false
	}
	if d.depth++; d.depth > maxJSONDepth {
		return false
	}
	defer func() { d.depth-- }()
	d.pos++
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return true
	}
	var seen uint64
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return false
		}
		k, ok := d.str(true)
		if !ok {
			return false
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return false
		}
		d.pos++
		d.skipSpace()
		i := fieldIndex(names, k)
		switch {
		case i >= 0:
			if seen&(1<<i) != 0 {
				return false
			}
			seen |= 1 << i
			if !field(i) {
				return false
			}
		case mayMatchField(names, k):
			return false
		default:
			if _, ok := d.value(); !ok {
				return false
			}
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return true
		default:
			return false
		}
	}
}

func fieldIndex(names []string, key string) int {
	for i, n := range names {
		if n == key {
			return i
		}
	}
	return -1
}

// mayMatchField reports whether encoding/json might decode key into one
// of the fields: it matches regardless of case, with Unicode folding, so
// any non-ASCII key is suspect.
func mayMatchField(names []string, key string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return true
		}
	}
	return false
}

// null consumes a null literal.
func (d *jsonValues) null() bool {
	d.skipSpace()
	return d.literal("null")
}

// stringField reads a string into s; null leaves s alone.
func (d *jsonValues) stringField(s *string) bool {
	if d.null() {
		return true
	}
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		return false
	}
	v, ok := d.str(false)
	*s = v
	return ok
}

// objectField reads an object into m; null makes it nil.
func (d *jsonValues) objectField(m *map[string]any) bool {
	if d.null() {
		*m = nil
		return true
	}
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return false
	}
	v, ok := d.object()
	*m = v
	return ok
}

// stringsField reads a list of strings into list; null makes it nil.
func (d *jsonValues) stringsField(list *[]string) bool {
	v, ok := d.value()
	if !ok {
		return false
	}
	*list, ok = stringList(v)
	return ok
}

// stringList converts a decoded list of strings as encoding/json decodes
// into []string: null is a nil list, a null element is "".
func stringList(v any) ([]string, bool) {
	if v == nil {
		return nil, true
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(list))
	for i, e := range list {
		if e == nil {
			continue
		}
		if out[i], ok = e.(string); !ok {
			return nil, false
		}
	}
	return out, true
}
