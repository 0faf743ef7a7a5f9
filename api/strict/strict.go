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
	strictErrs, err := sigsjson.UnmarshalStrict(jsonData, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}
