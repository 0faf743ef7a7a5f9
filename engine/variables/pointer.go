package variables

import (
	"strconv"
	"strings"
)

// segment is one step of a JSON pointer: a map key or an array index.
type segment struct {
	key     string
	index   int
	isIndex bool
}

func (s segment) String() string {
	if s.isIndex {
		return strconv.Itoa(s.index)
	}
	return s.key
}

var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// formatPointer renders segments as an RFC 6901 JSON pointer; the empty
// path is "/", as in Kyverno's messages.
func formatPointer(segs []segment) string {
	if len(segs) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(s.String()))
	}
	return b.String()
}

// parsePointer splits a JSON pointer into segments. Numeric segments are
// taken as array indexes; a document lookup still accepts them as map keys.
func parsePointer(p string) []segment {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	parts := strings.Split(p, "/")
	segs := make([]segment, len(parts))
	for i, part := range parts {
		part = pointerUnescaper.Replace(part)
		if n, err := strconv.Atoi(part); err == nil && n >= 0 {
			segs[i] = segment{key: part, index: n, isIndex: true}
		} else {
			segs[i] = segment{key: part}
		}
	}
	return segs
}

// stripAnchor removes a Kyverno anchor from a pattern key: (k), =(k), ^(k),
// +(k), X(k), <(k) all name the resource field k.
func stripAnchor(k string) string {
	if !strings.HasSuffix(k, ")") {
		return k
	}
	for _, prefix := range []string{"(", "=(", "^(", "+(", "X(", "<("} {
		if strings.HasPrefix(k, prefix) && len(k) > len(prefix) {
			return k[len(prefix) : len(k)-1]
		}
	}
	return k
}
