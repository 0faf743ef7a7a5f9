package mutate

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The strategic merge runs on kyaml's node tree. These two converters move between
// unstructured values and yaml nodes directly, without a JSON or YAML text round trip:
// a node's tag carries the value's type, so strings that look like numbers or booleans
// stay strings and numbers keep their kind.

// toNode converts an unstructured value into a yaml node. Map keys are sorted so that
// the merge, and therefore the result, never depends on Go's map iteration order.
func toNode(v any) (*yaml.Node, error) {
	switch t := v.(type) {
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagNull, Value: "null"}, nil
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: yaml.NodeTagMap, Content: make([]*yaml.Node, 0, 2*len(t))}
		for _, k := range sortedKeys(t) {
			child, err := toNode(t[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagString, Value: k}, child)
		}
		return n, nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: yaml.NodeTagSeq, Content: make([]*yaml.Node, 0, len(t))}
		for i, e := range t {
			child, err := toNode(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			n.Content = append(n.Content, child)
		}
		return n, nil
	case string:
		// A style other than plain spares kyaml a YAML 1.1 re-parse of every string
		// it sets, done only to choose how to quote it; nothing here is printed.
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagString, Value: t, Style: yaml.DoubleQuotedStyle}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagBool, Value: strconv.FormatBool(t)}, nil
	case float64:
		return floatNode(t), nil
	case float32:
		return floatNode(float64(t)), nil
	}
	if i, ok := asInt64(v); ok {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagInt, Value: strconv.FormatInt(i, 10)}, nil
	}
	if n, ok := v.(interface{ String() string }); ok { // json.Number
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagInt, Value: strconv.FormatInt(i, 10)}, nil
		}
		if f, err := strconv.ParseFloat(n.String(), 64); err == nil {
			return floatNode(f), nil
		}
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}

// floatNode writes integral floats as ints, so that a merge key such as containerPort
// matches whether a document was decoded into float64 or int64, and the result follows
// the unstructured convention.
func floatNode(f float64) *yaml.Node {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagInt, Value: strconv.FormatInt(int64(f), 10)}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagFloat, Value: strconv.FormatFloat(f, 'g', -1, 64)}
}

func asInt64(v any) (int64, bool) {
	switch t := v.(type) {
	case int:
		return int64(t), true
	case int8:
		return int64(t), true
	case int16:
		return int64(t), true
	case int32:
		return int64(t), true
	case int64:
		return t, true
	case uint:
		return int64(t), true
	case uint8:
		return int64(t), true
	case uint16:
		return int64(t), true
	case uint32:
		return int64(t), true
	case uint64:
		return int64(t), true
	}
	return 0, false
}

// fromNode converts a yaml node back into an unstructured value. Nodes that kyaml
// creates itself (it copies patch nodes and may build empty maps) carry the same tags
// as the ones toNode builds; untagged scalars are resolved the way YAML 1.2 would.
func fromNode(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return fromNode(n.Content[0])
	case yaml.AliasNode:
		return fromNode(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			v, err := fromNode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := fromNode(c)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		return scalarValue(n)
	}
	return nil, fmt.Errorf("unsupported yaml node kind %d", n.Kind)
}

func scalarValue(n *yaml.Node) (any, error) {
	tag := n.Tag
	if tag == "" || tag == "!" {
		tag = n.ShortTag()
	}
	switch tag {
	case yaml.NodeTagString:
		return n.Value, nil
	case yaml.NodeTagNull:
		return nil, nil
	case yaml.NodeTagBool:
		return strconv.ParseBool(n.Value)
	case yaml.NodeTagInt:
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return i, nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		return normaliseNumber(v), nil
	case yaml.NodeTagFloat:
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, err
			}
			return normaliseNumber(v), nil
		}
		return normaliseNumber(f), nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	return normaliseNumber(v), nil
}

// normaliseNumber maps any Go number onto int64 (integral) or float64.
func normaliseNumber(v any) any {
	if i, ok := asInt64(v); ok {
		return i
	}
	if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	// Sized up front: this runs per request.
	keys := slices.AppendSeq(make([]string, 0, len(m)), maps.Keys(m))
	slices.Sort(keys)
	return keys
}
