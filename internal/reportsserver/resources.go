package reportsserver

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapiutil "k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/config/crd"
)

// resource is one served resource, as its CRD describes it.
type resource struct {
	gvr         schema.GroupVersionResource
	singular    string
	kind        string
	namespaced  bool
	shortNames  []string
	categories  []string
	columns     []apiextensionsv1.CustomResourceColumnDefinition
	schema      *apiextensionsv1.JSONSchemaProps
	validator   validation.SchemaValidator
	newFunc     func() runtime.Object
	newListFunc func() runtime.Object
}

// goTypes are the Go types of the report kinds, by group and kind.
var goTypes = map[schema.GroupKind][2]func() runtime.Object{
	{Group: v1alpha2.GroupVersion.Group, Kind: "PolicyReport"}: {
		func() runtime.Object { return &v1alpha2.PolicyReport{} }, func() runtime.Object { return &v1alpha2.PolicyReportList{} }},
	{Group: v1alpha2.GroupVersion.Group, Kind: "ClusterPolicyReport"}: {
		func() runtime.Object { return &v1alpha2.ClusterPolicyReport{} }, func() runtime.Object { return &v1alpha2.ClusterPolicyReportList{} }},
	{Group: openreportsv1alpha1.GroupName, Kind: "Report"}: {
		func() runtime.Object { return &openreportsv1alpha1.Report{} }, func() runtime.Object { return &openreportsv1alpha1.ReportList{} }},
	{Group: openreportsv1alpha1.GroupName, Kind: "ClusterReport"}: {
		func() runtime.Object { return &openreportsv1alpha1.ClusterReport{} }, func() runtime.Object { return &openreportsv1alpha1.ClusterReportList{} }},
}

// loadResources reads the report CRDs charter ships and pairs each served
// version with its Go types.
func loadResources() ([]*resource, error) {
	paths, err := fs.Glob(crd.Reports, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []*resource
	for _, path := range paths {
		data, err := fs.ReadFile(crd.Reports, path)
		if err != nil {
			return nil, err
		}
		var def apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &def); err != nil {
			return nil, fmt.Errorf("config/crd/%s: %w", path, err)
		}
		types, ok := goTypes[schema.GroupKind{Group: def.Spec.Group, Kind: def.Spec.Names.Kind}]
		if !ok {
			return nil, fmt.Errorf("config/crd/%s: no Go types for %s", path, def.Spec.Names.Kind)
		}
		for _, v := range def.Spec.Versions {
			if !v.Served || !v.Storage {
				// One version per kind: the storage version.
				continue
			}
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return nil, fmt.Errorf("config/crd/%s: version %s has no schema", path, v.Name)
			}
			var internal apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				return nil, fmt.Errorf("config/crd/%s: %w", path, err)
			}
			validator, _, err := validation.NewSchemaValidator(&internal)
			if err != nil {
				return nil, fmt.Errorf("config/crd/%s: %w", path, err)
			}
			out = append(out, &resource{
				gvr:         schema.GroupVersionResource{Group: def.Spec.Group, Version: v.Name, Resource: def.Spec.Names.Plural},
				singular:    def.Spec.Names.Singular,
				kind:        def.Spec.Names.Kind,
				namespaced:  def.Spec.Scope == apiextensionsv1.NamespaceScoped,
				shortNames:  def.Spec.Names.ShortNames,
				categories:  def.Spec.Names.Categories,
				columns:     v.AdditionalPrinterColumns,
				schema:      v.Schema.OpenAPIV3Schema,
				validator:   validator,
				newFunc:     types[0],
				newListFunc: types[1],
			})
		}
	}
	return out, nil
}

// goName is the name OpenAPI definitions are keyed by, the one the API
// server looks a resource's definition up by.
func goName(obj runtime.Object) string { return openapiutil.GetCanonicalTypeName(obj) }

// openAPISchema is the CRD's schema as an OpenAPI schema, its metadata a
// reference to ObjectMeta as in a built-in type's definition.
func (r *resource) openAPISchema(ref func(string) spec.Ref) (spec.Schema, error) {
	data, err := json.Marshal(r.schema)
	if err != nil {
		return spec.Schema{}, err
	}
	var s spec.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		return spec.Schema{}, err
	}
	if s.Properties == nil {
		s.Properties = map[string]spec.Schema{}
	}
	s.Properties["metadata"] = spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(objectMetaName)}}
	return s, nil
}

// The OpenAPI names of the meta types the report schemas refer to.
var (
	objectMetaName = metav1.ObjectMeta{}.OpenAPIModelName()
	listMetaName   = metav1.ListMeta{}.OpenAPIModelName()
)
