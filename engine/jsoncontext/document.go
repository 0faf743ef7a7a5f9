// Package jsoncontext builds the JSON document that Kyverno variables
// ({{ request.object.metadata.name }}, {{ images.containers.x.tag }},
// context entries, foreach elements) are evaluated against.
//
// A Document is a tree of plain JSON values (map[string]any, []any, string,
// float64, bool, nil). Documents are layered cheaply: Child copies only the
// top-level map, and Set copies the maps along the path it writes, so a
// rule's context entries or a foreach element never leak into the request's
// base document or into sibling rules, and nothing is deep-copied.
package jsoncontext

import (
	"strings"
	"sync"
)

// Querier evaluates a JMESPath expression against data (see
// engine/jmespath.Interpreter.Search).
type Querier interface {
	Search(expr string, data any) (any, error)
}

// RootReader is a Querier that can tell that an expression never reads a
// top-level entry of the data (engine/jmespath.Interpreter.MayReadRoot): a
// document then leaves a lazy entry out of the queries that cannot see it.
type RootReader interface {
	MayReadRoot(expr, key string) bool
}

// Document is a layered JSON context document.
type Document struct {
	root    map[string]any
	querier Querier
	// lazy is a top-level entry worked out on the first read that may
	// see it (see Lazy), shared by the documents layered on this one;
	// filled says it is in root (or was left out for good).
	lazy   *lazyEntry
	filled bool
}

// lazyEntry is a top-level entry of a document worked out once, on first
// use, by compute; a nil value leaves the entry out.
type lazyEntry struct {
	key     string
	once    sync.Once
	compute func() any
	value   any
}

func (l *lazyEntry) get() any {
	l.once.Do(func() { l.value, l.compute = l.compute(), nil })
	return l.value
}

// New returns a document with the given top-level entries, evaluated by q.
// The map is owned by the document from now on.
func New(q Querier, root map[string]any) *Document {
	if root == nil {
		root = map[string]any{}
	}
	return &Document{root: root, querier: q}
}

// Lazy adds the top-level entry key, worked out by compute (nil: no entry)
// only when a read may see it: a query that names it at the top, or reads
// the whole document, Get of a path under it, Root, or Set below it. The
// documents layered on d share the one computation. The request's images
// are one: most policies never read them, and working them out for every
// review is a dozen allocations.
func (d *Document) Lazy(key string, compute func() any) {
	d.lazy, d.filled = &lazyEntry{key: key, compute: compute}, false
}

// fill puts the lazy entry in the root, unless the root has it already.
func (d *Document) fill() {
	if d.lazy == nil || d.filled {
		return
	}
	d.filled = true
	if _, ok := d.root[d.lazy.key]; ok {
		return
	}
	if v := d.lazy.get(); v != nil {
		d.root[d.lazy.key] = v
	}
}

// Child returns a document that starts with the same content; what is Set
// on the child does not show in the parent.
func (d *Document) Child() *Document {
	root := make(map[string]any, len(d.root)+4)
	for k, v := range d.root {
		root[k] = v
	}
	return &Document{root: root, querier: d.querier, lazy: d.lazy, filled: d.filled}
}

// Reset makes d again what parent.Child() returned, in d's own top-level
// map: a foreach evaluates its elements one after another, each in a
// child of the entry's document, and one map serves them all. d must be a
// child of parent that nothing else holds (see SetRoot), and what was
// read from it before must not be needed any more.
func (d *Document) Reset(parent *Document) {
	clear(d.root)
	for k, v := range parent.root {
		d.root[k] = v
	}
	d.querier, d.lazy, d.filled = parent.querier, parent.lazy, parent.filled
}

// Root returns the top-level map. Callers must not modify it.
func (d *Document) Root() map[string]any {
	d.fill()
	return d.root
}

// Query evaluates a JMESPath expression against the document, so the
// document can serve as a variables resolver.
func (d *Document) Query(expr string) (any, error) {
	if d.lazy != nil && !d.filled {
		if rr, ok := d.querier.(RootReader); !ok || rr.MayReadRoot(expr, d.lazy.key) {
			d.fill()
		}
	}
	return d.querier.Search(expr, d.root)
}

// Get returns the value at a dotted path ("request.operation") and whether
// it exists. A segment in double quotes is one key (see SplitPath).
func (d *Document) Get(path string) (any, bool) {
	keys := SplitPath(path)
	if d.lazy != nil && keys[0] == d.lazy.key {
		d.fill()
	}
	var cur any = d.root
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// SetRoot stores a top-level entry in place, without copying. Use it only
// on a document fresh from Child that nothing else holds yet (e.g. to add
// foreach elements).
func (d *Document) SetRoot(key string, v any) {
	if d.lazy != nil && key == d.lazy.key {
		d.filled = true // replaced: never worked out for this document
	}
	d.root[key] = v
}

// Set stores v at a dotted path ("request.operation", "element"), creating
// maps as needed. A segment in double quotes is one key, dots included
// (see SplitPath). Maps along the path are copied first, so documents that
// share them are not affected.
func (d *Document) Set(path string, v any) {
	keys := SplitPath(path)
	if d.lazy != nil && keys[0] == d.lazy.key {
		d.fill()
	}
	d.root = setPath(d.root, keys, v)
}

func setPath(m map[string]any, keys []string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, val := range m {
		out[k] = val
	}
	if len(keys) == 1 {
		out[keys[0]] = v
		return out
	}
	child, _ := m[keys[0]].(map[string]any)
	out[keys[0]] = setPath(child, keys[1:], v)
	return out
}

// SplitPath splits a dotted path into keys. A segment in double quotes, as
// in JMESPath, is one key even when it holds dots:
// request.object.metadata.annotations."example.com/team" has five keys, the
// last example.com/team. Inside quotes, \" and \\ stand for " and \. A
// path without quotes splits at every dot.
func SplitPath(path string) []string {
	if !strings.Contains(path, `"`) {
		return strings.Split(path, ".")
	}
	var keys []string
	var key strings.Builder
	quoted := false
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case quoted && c == '\\' && i+1 < len(path):
			i++
			key.WriteByte(path[i])
		case c == '"':
			quoted = !quoted
		case c == '.' && !quoted:
			keys = append(keys, key.String())
			key.Reset()
		default:
			key.WriteByte(c)
		}
	}
	return append(keys, key.String())
}
