package celenv

import (
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// SharedAdapter converts a request's unstructured values to CEL values
// for every expression of every policy that reads them. A map or list is
// wrapped once per request: its wrapper keeps the wrappers of the maps and
// lists under it (celMap.kids, celList.elems), so every policy reading
// object.spec.containers walks the same wrappers instead of allocating its
// own on each access (a set of CEL policies reads the same few fields many
// times over). The wrappers, their iterators and those links come from
// chunks (slab), a few allocations per request instead of one or two per
// value. A wrapper only views its map or list: one changed in place reads
// as changed, and a link is followed only while it still names the value
// found there. The wrappers behave as cel-go's own for unstructured values
// (types.NewStringInterfaceMap, types.NewDynamicList; TestCELValuesAsCELGo).
// One request's evaluation is sequential: the adapter is not safe for
// concurrent use.
type SharedAdapter struct {
	maps        slab[celMap]
	lists       slab[celList]
	kids        slab[celKid]
	iters       slab[celListIterator]
	concatIters slab[celConcatIterator]
	elems       slab[ref.Val]
}

// Hints of the slabs of sharedAdapters, by kind (slab).
var slabHints struct {
	maps, lists, kids, iters, concatIters, elems atomic.Int32
}

// UseHints makes the adapter's slabs start at their hints (a zero
// adapter's start small and grow).
func (a *SharedAdapter) UseHints() {
	a.maps.hint, a.lists.hint, a.kids.hint = &slabHints.maps, &slabHints.lists, &slabHints.kids
	a.iters.hint, a.concatIters.hint, a.elems.hint = &slabHints.iters, &slabHints.concatIters, &slabHints.elems
}

// NativeToValue wraps v afresh (the roots of a request's values: object,
// oldObject, request, namespaceObject, each built once per request).
func (a *SharedAdapter) NativeToValue(v any) ref.Val {
	if c := a.wrap(v); c != nil {
		return c
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// wrap returns a new wrapper of a map or a non-empty list, nil for any
// other value (converted as cel-go's adapter converts it).
func (a *SharedAdapter) wrap(v any) ref.Val {
	switch x := v.(type) {
	case map[string]any:
		if x != nil {
			w := a.maps.new()
			w.a, w.m = a, x
			return w
		}
	case []any:
		if len(x) > 0 {
			w := a.lists.new()
			w.a, w.l = a, x
			return w
		}
	}
	return nil
}

// wraps reports whether c is a wrapper of v, still the same map or list.
func wraps(c ref.Val, v any) bool {
	switch x := v.(type) {
	case map[string]any:
		w, ok := c.(*celMap)
		return ok && sameMap(w.m, x)
	case []any:
		w, ok := c.(*celList)
		return ok && sameList(w.l, x)
	}
	return false
}

// maxKids bounds the wrapped children a map keeps: finding one is a walk
// over them, so a map with many map or list values (a CRD's) wraps the
// ones past it on each access rather than walking a long chain.
const maxKids = 8

// kid returns the CEL value of v, a value of the map of w: the wrapper of
// a map or list made when it was first read, else a new one.
func (a *SharedAdapter) kid(w *celMap, v any) ref.Val {
	switch v.(type) {
	case map[string]any, []any:
	default:
		return types.DefaultTypeAdapter.NativeToValue(v)
	}
	n := 0
	for k := w.kids; k != nil; k, n = k.next, n+1 {
		if wraps(k.val, v) {
			return k.val
		}
	}
	c := a.wrap(v)
	if c == nil {
		return types.DefaultTypeAdapter.NativeToValue(v)
	}
	if n < maxKids {
		k := a.kids.new()
		k.val, k.next = c, w.kids
		w.kids = k
	}
	return c
}

// elem returns the CEL value of element i of the list of w: a map or
// list is wrapped once, while it stays the element there.
func (a *SharedAdapter) elem(w *celList, i int) ref.Val {
	v := w.l[i]
	if w.elems != nil && wraps(w.elems[i], v) {
		return w.elems[i]
	}
	c := a.wrap(v)
	if c == nil {
		return types.DefaultTypeAdapter.NativeToValue(v)
	}
	if w.elems == nil {
		w.elems = a.elems.take(len(w.l))
	}
	w.elems[i] = c
	return c
}

func sameMap(x, y map[string]any) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&x)) == *(*unsafe.Pointer)(unsafe.Pointer(&y))
}

func sameList(x, y []any) bool {
	return len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
}

// slab hands out T's from chunks. The first chunk of a request is as
// large as its kind's hint, about what requests needed lately: each
// request that needs more moves the hint a quarter of the way up to its
// need, each request moves it down by a sixty-fourth, so that the first
// chunk fits most requests without holding much more than they use (the
// bytes a request allocates decide how often the garbage collector runs);
// a request needing more gets further chunks, half as large as what it
// has used. Hints are kept in sixteenths, so that they shrink smoothly.
type slab[T any] struct {
	free []T
	used int
	hint *atomic.Int32
}

// Bounds of a slab's chunks: a request needing more than slabMax of a
// kind gets further chunks of slabMax, and take serves a longer run with
// an allocation of its own.
const (
	slabMin = 4
	slabMax = 256
)

func (s *slab[T]) new() *T {
	if len(s.free) == 0 {
		s.grow(1)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	s.used++
	return p
}

// take returns n zero T's.
func (s *slab[T]) take(n int) []T {
	if n > slabMax {
		return make([]T, n)
	}
	if n > len(s.free) {
		s.grow(n)
	}
	out := s.free[:n:n]
	s.free = s.free[n:]
	s.used += n
	return out
}

// grow starts a chunk holding at least n.
func (s *slab[T]) grow(n int) {
	size := s.used / 2
	switch {
	case s.hint == nil:
		size = s.used
	case s.used == 0:
		h := s.hint.Load()
		size = int(h+15) / 16
		s.hint.Store(h - h/64)
	default:
		if h, need := s.hint.Load(), int32(16*(s.used+n)); need > h {
			s.hint.CompareAndSwap(h, min(h+(need-h)/4, 16*slabMax))
		}
	}
	s.free = make([]T, min(max(size, n, slabMin), slabMax))
}

// celKid links a wrapped child of a map to the next one.
type celKid struct {
	val  ref.Val
	next *celKid
}

// celMap is a request's map[string]any as a CEL map, as
// types.NewStringInterfaceMap makes it.
type celMap struct {
	a    *SharedAdapter
	m    map[string]any
	kids *celKid
}

var (
	_ traits.Mapper   = (*celMap)(nil)
	_ traits.Foldable = (*celMap)(nil)
	_ traits.Zeroer   = (*celMap)(nil)
)

// Find implements traits.Mapper as cel-go's map of strings does: a key
// that is not a string is not found.
func (w *celMap) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	v, found := w.m[string(k)]
	if !found {
		return nil, false
	}
	return w.a.kid(w, v), true
}

func (w *celMap) Contains(key ref.Val) ref.Val {
	_, found := w.Find(key)
	return types.Bool(found)
}

func (w *celMap) Get(key ref.Val) ref.Val {
	v, found := w.Find(key)
	if !found {
		return types.ValOrErr(v, "no such key: %v", key)
	}
	return v
}

func (w *celMap) Size() ref.Val     { return types.Int(len(w.m)) }
func (w *celMap) IsZeroValue() bool { return len(w.m) == 0 }
func (w *celMap) Type() ref.Type    { return types.MapType }
func (w *celMap) Value() any        { return w.m }

// Iterator goes over a copy of the keys, as cel-go's does.
func (w *celMap) Iterator() traits.Iterator {
	keys := make([]string, 0, len(w.m))
	for k := range w.m {
		keys = append(keys, k)
	}
	return &celKeyIterator{keys: keys}
}

// Fold implements traits.Foldable, with each value as Find gives it.
func (w *celMap) Fold(f traits.Folder) {
	for k, v := range w.m {
		if !f.FoldEntry(k, w.a.kid(w, v)) {
			break
		}
	}
}

func (w *celMap) ConvertToNative(t reflect.Type) (any, error) {
	return types.NewStringInterfaceMap(w.a, w.m).ConvertToNative(t)
}

func (w *celMap) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return w
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.MapType, t)
}

// Equal is cel-go's map equality.
func (w *celMap) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Mapper)
	if !ok {
		return types.False
	}
	if w.Size() != o.Size() {
		return types.False
	}
	for k := range w.m {
		key := types.String(k)
		this, _ := w.Find(key)
		that, found := o.Find(key)
		if !found {
			return types.False
		}
		if types.Equal(this, that) == types.False {
			return types.False
		}
	}
	return types.True
}

func (w *celMap) String() string { return fmt.Sprint(types.NewStringInterfaceMap(w.a, w.m)) }

// celKeyIterator goes over a map's keys.
type celKeyIterator struct {
	celIterator
	keys   []string
	cursor int
}

func (it *celKeyIterator) HasNext() ref.Val { return types.Bool(it.cursor < len(it.keys)) }

func (it *celKeyIterator) Next() ref.Val {
	if it.cursor < len(it.keys) {
		it.cursor++
		return types.String(it.keys[it.cursor-1])
	}
	return nil
}

// celIterator is the ref.Val of an iterator, as cel-go's.
type celIterator struct{}

func (celIterator) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion on iterators not supported")
}
func (celIterator) ConvertToType(ref.Type) ref.Val { return types.NewErr("no such overload") }
func (celIterator) Equal(ref.Val) ref.Val          { return types.NewErr("no such overload") }
func (celIterator) Type() ref.Type                 { return types.IteratorType }
func (celIterator) Value() any                     { return nil }

// celList is a request's []any as a CEL list, as types.NewDynamicList
// makes it.
type celList struct {
	a *SharedAdapter
	l []any
	// elems are the wrapped maps and lists of l, by index (nil until one
	// is read).
	elems []ref.Val
}

var (
	_ traits.Lister   = (*celList)(nil)
	_ traits.Foldable = (*celList)(nil)
	_ traits.Zeroer   = (*celList)(nil)
)

func (w *celList) Get(index ref.Val) ref.Val {
	i, err := types.IndexOrError(index)
	if err != nil {
		return types.ValOrErr(index, "%v", err)
	}
	if i < 0 || i >= len(w.l) {
		return types.NewErr("index '%d' out of range in list size '%d'", i, w.Size())
	}
	return w.a.elem(w, i)
}

func (w *celList) Contains(elem ref.Val) ref.Val {
	for i := range w.l {
		if b, ok := elem.Equal(w.a.elem(w, i)).(types.Bool); ok && b == types.True {
			return types.True
		}
	}
	return types.False
}

// Add concatenates, as cel-go's lists do: a view of both, or the other
// one when one is empty.
func (w *celList) Add(other ref.Val) ref.Val { return concatLists(w.a, w, other) }

func (w *celList) Iterator() traits.Iterator {
	it := w.a.iters.new()
	it.list = w
	return it
}

// Fold implements traits.Foldable, with each element as Get gives it.
func (w *celList) Fold(f traits.Folder) {
	for i := range w.l {
		if !f.FoldEntry(i, w.a.elem(w, i)) {
			break
		}
	}
}

func (w *celList) Size() ref.Val     { return types.Int(len(w.l)) }
func (w *celList) IsZeroValue() bool { return len(w.l) == 0 }
func (w *celList) Type() ref.Type    { return types.ListType }
func (w *celList) Value() any        { return w.l }

func (w *celList) ConvertToNative(t reflect.Type) (any, error) {
	return types.NewDynamicList(w.a, w.l).ConvertToNative(t)
}

func (w *celList) ConvertToType(t ref.Type) ref.Val { return listToType(w, t) }
func (w *celList) Equal(other ref.Val) ref.Val      { return listsEqual(w, other, false) }
func (w *celList) String() string                   { return fmt.Sprint(types.NewDynamicList(w.a, w.l)) }

func listToType(l traits.Lister, t ref.Type) ref.Val {
	switch t {
	case types.ListType:
		return l
	case types.TypeType:
		return types.ListType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.ListType, t)
}

// listsEqual is cel-go's list equality; its concatenated lists (keepErr)
// answer the first error or unknown of an element comparison rather than
// true.
func listsEqual(l traits.Lister, other ref.Val, keepErr bool) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.False
	}
	if l.Size() != o.Size() {
		return types.False
	}
	var maybeErr ref.Val
	for i := types.IntZero; i < l.Size().(types.Int); i++ {
		eq := types.Equal(l.Get(i), o.Get(i))
		if eq == types.False {
			return types.False
		}
		if keepErr && maybeErr == nil && types.IsUnknownOrError(eq) {
			maybeErr = eq
		}
	}
	if maybeErr != nil {
		return maybeErr
	}
	return types.True
}

// concatLists is prev + next as cel-go adds lists.
func concatLists(a *SharedAdapter, prev traits.Lister, next ref.Val) ref.Val {
	n, ok := next.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(next)
	}
	prevSize, nextSize := prev.Size().(types.Int), n.Size().(types.Int)
	if prevSize == types.IntZero {
		return next
	}
	if nextSize == types.IntZero {
		return prev
	}
	return &celConcat{a: a, prev: prev, next: n, size: prevSize + nextSize}
}

// celConcat is a list added to another, a view of both, as cel-go's
// concatenated list.
type celConcat struct {
	a          *SharedAdapter
	prev, next traits.Lister
	size       types.Int
	value      []any
}

var (
	_ traits.Lister   = (*celConcat)(nil)
	_ traits.Foldable = (*celConcat)(nil)
	_ traits.Zeroer   = (*celConcat)(nil)
)

func (l *celConcat) Add(other ref.Val) ref.Val { return concatLists(l.a, l, other) }

func (l *celConcat) Contains(elem ref.Val) ref.Val {
	prev := l.prev.Contains(elem)
	if prev == types.True {
		return prev
	}
	next := l.next.Contains(elem)
	if next == types.True {
		return next
	}
	if types.IsUnknownOrError(prev) {
		return prev
	}
	return next
}

func (l *celConcat) Get(index ref.Val) ref.Val {
	ind, err := types.IndexOrError(index)
	if err != nil {
		return types.ValOrErr(index, "%v", err)
	}
	i := types.Int(ind)
	if prevSize := l.prev.Size().(types.Int); i >= prevSize {
		return l.next.Get(i - prevSize)
	}
	return l.prev.Get(i)
}

func (l *celConcat) Iterator() traits.Iterator {
	it := l.a.concatIters.new()
	it.list = l
	return it
}

func (l *celConcat) Fold(f traits.Folder) {
	for i := types.Int(0); i < l.size; i++ {
		if !f.FoldEntry(i, l.Get(i)) {
			break
		}
	}
}

func (l *celConcat) Size() ref.Val     { return l.size }
func (l *celConcat) IsZeroValue() bool { return l.size == 0 }
func (l *celConcat) Type() ref.Type    { return types.ListType }

// Value is the elements' values, merged once.
func (l *celConcat) Value() any {
	if l.value == nil {
		merged := make([]any, l.size)
		for i := types.Int(0); i < l.size; i++ {
			merged[i] = l.Get(i).Value()
		}
		l.value = merged
	}
	return l.value
}

func (l *celConcat) ConvertToNative(t reflect.Type) (any, error) {
	return types.NewDynamicList(l.a, l.Value().([]any)).ConvertToNative(t)
}

func (l *celConcat) ConvertToType(t ref.Type) ref.Val { return listToType(l, t) }
func (l *celConcat) Equal(other ref.Val) ref.Val      { return listsEqual(l, other, true) }

func (l *celConcat) String() string {
	var sb strings.Builder
	sb.WriteString("[")
	for i := types.Int(0); i < l.size; i++ {
		fmt.Fprintf(&sb, "%v", l.Get(i))
		if i != l.size-1 {
			sb.WriteString(", ")
		}
	}
	sb.WriteString("]")
	return sb.String()
}

// celListIterator goes over a list by index.
type celListIterator struct {
	celIterator
	list   *celList
	cursor int
}

func (it *celListIterator) HasNext() ref.Val { return types.Bool(it.cursor < len(it.list.l)) }

func (it *celListIterator) Next() ref.Val {
	if it.cursor < len(it.list.l) {
		it.cursor++
		return it.list.a.elem(it.list, it.cursor-1)
	}
	return nil
}

// celConcatIterator goes over a concatenated list by index.
type celConcatIterator struct {
	celIterator
	list   *celConcat
	cursor types.Int
}

func (it *celConcatIterator) HasNext() ref.Val { return types.Bool(it.cursor < it.list.size) }

func (it *celConcatIterator) Next() ref.Val {
	if it.cursor < it.list.size {
		it.cursor++
		return it.list.Get(it.cursor - 1)
	}
	return nil
}
