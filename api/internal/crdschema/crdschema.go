// Package crdschema checks objects against the generated CRDs the way the
// API server does: OpenAPI validation (types, enums, required fields) and
// pruning (fields the structural schema does not know, which the API server
// drops, or refuses under strict field validation).
package crdschema

import (
	"fmt"
	"os"

	apiextinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Schema is the schema of one version of a CRD.
type Schema struct {
	Group, Version, Kind string
	structural           *structuralschema.Structural
	validator            validation.SchemaValidator
}

// Load reads a CRD file and returns the schema of each served version.
func Load(file string) ([]*Schema, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []*Schema
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("%s: version %s has no schema", file, v.Name)
		}
		var internal apiextinternal.JSONSchemaProps
		if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		structural, err := structuralschema.NewStructural(&internal)
		if err != nil {
			return nil, fmt.Errorf("%s: version %s: %w", file, v.Name, err)
		}
		if errs := structuralschema.ValidateStructural(field.NewPath("openAPIV3Schema"), structural); len(errs) > 0 {
			return nil, fmt.Errorf("%s: version %s: schema is not structural: %w", file, v.Name, errs.ToAggregate())
		}
		validator, _, err := validation.NewSchemaValidator(&internal)
		if err != nil {
			return nil, fmt.Errorf("%s: version %s: %w", file, v.Name, err)
		}
		out = append(out, &Schema{
			Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind,
			structural: structural, validator: validator,
		})
	}
	return out, nil
}

// Check validates obj (a decoded JSON object) and returns the paths of the
// fields pruning would drop and the validation errors. obj is not changed.
func (s *Schema) Check(obj map[string]any) (pruned []string, errs field.ErrorList) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	var cp map[string]any
	if err := yaml.Unmarshal(data, &cp); err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	pruned = pruning.PruneWithOptions(cp, s.structural, true, opts)
	errs = validation.ValidateCustomResource(nil, obj, s.validator)
	return pruned, errs
}
