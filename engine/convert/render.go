package convert

import (
	"encoding/json"

	"sigs.k8s.io/yaml"
)

// ObjectMap renders a converted object without the empty fields a typed
// object carries (creationTimestamp: null, status).
func ObjectMap(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	delete(m, "status")
	return m, nil
}

// YAML renders a result's outputs as a multi-document YAML stream.
func (r *Result) YAML() ([]byte, error) {
	var out []byte
	for i, o := range r.Outputs {
		m, err := ObjectMap(o.Object)
		if err != nil {
			return nil, err
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, y...)
	}
	return out, nil
}
