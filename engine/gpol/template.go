package gpol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
)

// Interpolation modes of a GeneratingPolicy template
// (cel-policy-types.md §3.3.3).
const (
	interpolateNone = "none"
	interpolateCEL  = "cel"
)

// gpolTemplate is a compiled generate template: YAML documents whose
// values may hold (( expr )) placeholders (interpolate: cel), compiled
// with the policy so that a bad placeholder is refused at admission, not
// met on the first trigger.
type gpolTemplate struct {
	docs []tmplNode
}

// tmplNode is one value of a template: a literal, a map or list of
// nodes, a placeholder spliced in as any CEL value, or a string with
// placeholders embedded.
type tmplNode struct {
	literal any
	entries []tmplEntry
	items   []tmplNode
	// kind tells which of the fields above holds the value.
	kind tmplKind
	// splice is a value that is exactly one placeholder.
	splice *celruntime.Program
	// parts of an interpolated string: literal text and placeholders, in
	// order.
	parts []tmplPart
}

type tmplKind uint8

const (
	tmplLiteral tmplKind = iota
	tmplMap
	tmplList
	tmplSplice
	tmplString
)

type tmplEntry struct {
	key   string
	value tmplNode
}

type tmplPart struct {
	text string
	expr *celruntime.Program
}

// compileTemplate parses a template's YAML and compiles its placeholders
// with compile (nil for interpolate: none, whose values are all literal).
func compileTemplate(t *policiesv1.GenerationTemplate, compile func(expr string) *celruntime.Program) (*gpolTemplate, error) {
	mode := t.Interpolate
	switch mode {
	case "", interpolateNone:
		mode = interpolateNone
	case interpolateCEL:
	default:
		return nil, fmt.Errorf("interpolate: %q is not one of none, cel", t.Interpolate)
	}
	dec := yaml.NewDecoder(strings.NewReader(t.Value))
	out := &gpolTemplate{}
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("value: failed to parse YAML: %w", err)
		}
		root := &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			// An empty document (a trailing ---).
			continue
		}
		if root.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("value: document %d must be a mapping (an object)", i)
		}
		c := &tmplCompiler{cel: mode == interpolateCEL, compile: compile}
		node, err := c.node(root, "")
		if err != nil {
			return nil, fmt.Errorf("value: document %d: %w", i, err)
		}
		out.docs = append(out.docs, node)
	}
	if len(out.docs) == 0 {
		return nil, errors.New("value: a template needs at least one YAML document")
	}
	return out, nil
}

// tmplCompiler turns YAML nodes into template nodes.
type tmplCompiler struct {
	cel     bool
	compile func(expr string) *celruntime.Program
}

func (c *tmplCompiler) node(n *yaml.Node, path string) (tmplNode, error) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		return c.mapping(n, path)
	case yaml.SequenceNode:
		out := tmplNode{kind: tmplList, items: make([]tmplNode, 0, len(n.Content))}
		for i, item := range n.Content {
			v, err := c.node(item, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return tmplNode{}, err
			}
			out.items = append(out.items, v)
		}
		return out, nil
	case yaml.ScalarNode:
		if c.cel && n.Tag == "!!str" {
			return c.text(n.Value, path)
		}
		v, err := literalOf(n)
		if err != nil {
			return tmplNode{}, fmt.Errorf("%s: %w", pathOrRoot(path), err)
		}
		return tmplNode{literal: v}, nil
	}
	return tmplNode{}, fmt.Errorf("%s: unsupported YAML node", pathOrRoot(path))
}

func (c *tmplCompiler) mapping(n *yaml.Node, path string) (tmplNode, error) {
	out := tmplNode{kind: tmplMap}
	var merged []tmplEntry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			// A merge key pulls in another mapping; it is taken
			// literally: a placeholder there is refused, as in Kyverno.
			if c.cel && hasPlaceholder(v) {
				return tmplNode{}, fmt.Errorf("%s: placeholders are not allowed under YAML merge keys", pathOrRoot(path))
			}
			var m map[string]any
			if err := v.Decode(&m); err != nil {
				return tmplNode{}, fmt.Errorf("%s: merge key: %w", pathOrRoot(path), err)
			}
			for mk, mv := range m {
				merged = append(merged, tmplEntry{key: mk, value: tmplNode{literal: celruntime.PlainJSON(mv)}})
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return tmplNode{}, fmt.Errorf("%s: mapping keys must be strings", pathOrRoot(path))
		}
		if c.cel && hasPlaceholderText(k.Value) {
			return tmplNode{}, fmt.Errorf("%s: placeholders are not supported in mapping keys (%q)", pathOrRoot(path), k.Value)
		}
		key := unescapePlaceholders(k.Value, c.cel)
		val, err := c.node(v, path+"."+key)
		if err != nil {
			return tmplNode{}, err
		}
		out.entries = append(out.entries, tmplEntry{key: key, value: val})
	}
	// Keys of the mapping itself win over merged ones.
	for _, m := range merged {
		if !slices.ContainsFunc(out.entries, func(e tmplEntry) bool { return e.key == m.key }) {
			out.entries = append(out.entries, m)
		}
	}
	return out, nil
}

// text compiles a string that may hold placeholders: exactly one
// placeholder is a splice of any type, placeholders in other text are
// interpolated, "\((" is a literal "((".
func (c *tmplCompiler) text(s, path string) (tmplNode, error) {
	var parts []tmplPart
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], `\((`):
			lit.WriteString("((")
			i += 3
		case strings.HasPrefix(s[i:], "(("):
			end, err := placeholderEnd(s, i+2)
			if err != nil {
				return tmplNode{}, fmt.Errorf("%s: %w in %q", pathOrRoot(path), err, s)
			}
			expr := strings.TrimSpace(s[i+2 : end])
			if expr == "" {
				return tmplNode{}, fmt.Errorf("%s: empty placeholder in %q", pathOrRoot(path), s)
			}
			prog := c.compile(expr)
			if prog == nil {
				return tmplNode{}, fmt.Errorf("%s: invalid placeholder expression %q", pathOrRoot(path), expr)
			}
			if lit.Len() > 0 {
				parts = append(parts, tmplPart{text: lit.String()})
				lit.Reset()
			}
			parts = append(parts, tmplPart{expr: prog})
			i = end + 2
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	if lit.Len() > 0 {
		parts = append(parts, tmplPart{text: lit.String()})
	}
	switch {
	case len(parts) == 0:
		return tmplNode{literal: ""}, nil
	case len(parts) == 1 && parts[0].expr == nil:
		return tmplNode{literal: parts[0].text}, nil
	case len(parts) == 1:
		return tmplNode{kind: tmplSplice, splice: parts[0].expr}, nil
	}
	return tmplNode{kind: tmplString, parts: parts}, nil
}

// placeholderEnd finds the "))" that closes a placeholder whose
// expression starts at s[from]: the first one outside the expression's
// own parentheses and string literals, so (( string(f(x)) )) and
// (( "))".size() )) hold what they seem to.
func placeholderEnd(s string, from int) (int, error) {
	depth := 0
	var quote byte
	for i := from; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case c == ')' && strings.HasPrefix(s[i:], "))"):
			return i, nil
		case c == ')':
			return 0, errors.New("unbalanced parenthesis in placeholder")
		}
	}
	if quote != 0 {
		return 0, errors.New("unterminated string in placeholder")
	}
	return 0, errors.New("unterminated placeholder")
}

func pathOrRoot(path string) string {
	if path == "" {
		return "document root"
	}
	return strings.TrimPrefix(path, ".")
}

// hasPlaceholder reports whether a node's scalars hold a placeholder.
func hasPlaceholder(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode {
		return hasPlaceholderText(n.Value)
	}
	return slices.ContainsFunc(n.Content, hasPlaceholder)
}

// hasPlaceholderText reports whether s holds a "((" that is not escaped.
func hasPlaceholderText(s string) bool {
	return strings.Contains(strings.ReplaceAll(s, `\((`, ""), "((")
}

func unescapePlaceholders(s string, cel bool) string {
	if !cel {
		return s
	}
	return strings.ReplaceAll(s, `\((`, "((")
}

// literalOf decodes a scalar as YAML types it (string, number, bool or
// null) into a JSON value: numbers are float64, as in generator.Apply's
// objects.
func literalOf(n *yaml.Node) (any, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	return celruntime.PlainJSON(v), nil
}

// render evaluates the template's placeholders and returns its documents,
// fresh objects on every call.
func (t *gpolTemplate) render(e *celruntime.Evaluator) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(t.docs))
	for i := range t.docs {
		v, err := t.docs[i].render(e, "")
		if err != nil {
			return nil, fmt.Errorf("template document %d: %w", i, err)
		}
		obj, _ := v.(map[string]any)
		out = append(out, obj)
	}
	return out, nil
}

func (n *tmplNode) render(e *celruntime.Evaluator, path string) (any, error) {
	switch n.kind {
	case tmplMap:
		out := make(map[string]any, len(n.entries))
		for i := range n.entries {
			v, err := n.entries[i].value.render(e, path+"."+n.entries[i].key)
			if err != nil {
				return nil, err
			}
			out[n.entries[i].key] = v
		}
		return out, nil
	case tmplList:
		out := make([]any, len(n.items))
		for i := range n.items {
			v, err := n.items[i].render(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case tmplSplice:
		val, err := e.Eval(n.splice)
		if err != nil {
			return nil, fmt.Errorf("%s: (( %s )): %w", pathOrRoot(path), n.splice.Expr, err)
		}
		v, err := celruntime.JSONValue(val)
		if err != nil {
			return nil, fmt.Errorf("%s: (( %s )): %w", pathOrRoot(path), n.splice.Expr, err)
		}
		return v, nil
	case tmplString:
		var b strings.Builder
		for _, p := range n.parts {
			if p.expr == nil {
				b.WriteString(p.text)
				continue
			}
			val, err := e.Eval(p.expr)
			if err != nil {
				return nil, fmt.Errorf("%s: (( %s )): %w", pathOrRoot(path), p.expr.Expr, err)
			}
			s, err := scalarText(val)
			if err != nil {
				return nil, fmt.Errorf("%s: (( %s )) %w", pathOrRoot(path), p.expr.Expr, err)
			}
			b.WriteString(s)
		}
		return b.String(), nil
	}
	return runtime.DeepCopyJSONValue(n.literal), nil
}

// scalarText formats a placeholder embedded in a string.
func scalarText(val ref.Val) (string, error) {
	switch v := val.(type) {
	case types.String:
		return string(v), nil
	case types.Int:
		return strconv.FormatInt(int64(v), 10), nil
	case types.Uint:
		return strconv.FormatUint(uint64(v), 10), nil
	case types.Double:
		return strconv.FormatFloat(float64(v), 'g', -1, 64), nil
	case types.Bool:
		return strconv.FormatBool(bool(v)), nil
	}
	return "", fmt.Errorf("is embedded in a string and must evaluate to a scalar (string, int, uint, double or bool), not %s", val.Type().TypeName())
}

// templateLiteralKinds returns the "apiVersion/Kind" of the template's
// documents whose apiVersion and kind are written literally.
func templateLiteralKinds(t *policiesv1.GenerationTemplate) []string {
	cel := t.Interpolate == interpolateCEL
	dec := yaml.NewDecoder(bytes.NewReader([]byte(t.Value)))
	var out []string
	for {
		var doc struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		}
		if err := dec.Decode(&doc); err != nil {
			// EOF, or YAML the compiler refuses.
			return out
		}
		if doc.APIVersion == "" || doc.Kind == "" || (cel && hasPlaceholderText(doc.APIVersion+doc.Kind)) {
			continue
		}
		k := unescapePlaceholders(doc.APIVersion, cel) + "/" + unescapePlaceholders(doc.Kind, cel)
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
}
