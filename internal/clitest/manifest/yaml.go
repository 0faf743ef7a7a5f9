package manifest

import (
	"fmt"
	"math"
	"strconv"

	yamlv2 "go.yaml.in/yaml/v2"
)

// decodeYAML parses one YAML document into the values encoding/json would
// produce for its JSON form, which is what sigs.k8s.io/yaml (and so
// kubectl and Kyverno) make of it: YAML 1.1 scalars (yes/no are booleans),
// every number a float64, map keys as strings. Parsing straight to these
// values skips the YAML → JSON → value round trip, the largest cost of
// reading a test corpus.
func decodeYAML(data []byte) (any, error) {
	var v any
	if err := yamlv2.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return jsonValue(v)
}

func jsonValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%v is not a JSON number", x)
		}
		return x, nil
	case []any:
		for i, e := range x {
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			key, err := jsonKey(k)
			if err != nil {
				return nil, err
			}
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			out[key] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported YAML value %T", v)
}

// jsonKey turns a YAML map key into a JSON object key the way
// sigs.k8s.io/yaml does.
func jsonKey(k any) (string, error) {
	switch x := k.(type) {
	case string:
		return x, nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(x), nil
	case nil:
		return "null", nil
	}
	return "", fmt.Errorf("unsupported map key %v (%T)", k, k)
}
