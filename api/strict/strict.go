// Package strict decodes YAML or JSON manifests into API types the way the
// API server does for a structural schema: a field the type does not know,
// or a field given twice, is an error naming the field's full path
// (e.g. `unknown field "spec.rules[0].match.any[0].resources.namespace"`).
// Keys are matched case-sensitively, as the API server matches them.
package strict

import (
	"errors"
	"fmt"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Unmarshal decodes a YAML or JSON document into obj. Unknown and
// duplicate fields are reported together, each with its path.
func Unmarshal(data []byte, obj any) error {
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	return UnmarshalJSON(jsonData, obj)
}

// UnmarshalJSON decodes a JSON document into obj as Unmarshal does,
// without Unmarshal's YAML pass: for JSON that encoding/json wrote (from
// an already decoded document), which that pass would only parse and write
// again unchanged. JSON from elsewhere goes through Unmarshal, which
// reads a number such as 1.0 as YAML does (an integer field takes it).
func UnmarshalJSON(data []byte, obj any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(data, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}
