package reportsserver

import (
	"context"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
)

// strategy is what the generic registry asks of a resource on create,
// update and delete: reports are validated against their CRD's schema
// and the object metadata rules, as kube-apiserver validates them when
// they are custom resources.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	res *resource
}

func newStrategy(res *resource) strategy {
	return strategy{ObjectTyper: Scheme, NameGenerator: names.SimpleNameGenerator, res: res}
}

func (s strategy) NamespaceScoped() bool { return s.res.namespaced }

func (strategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (strategy) WarningsOnCreate(context.Context, runtime.Object) []string        { return nil }
func (strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}
func (strategy) Canonicalize(runtime.Object)                   {}
func (strategy) AllowCreateOnUpdate(context.Context) bool      { return false }
func (strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

func (s strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := apimachineryvalidation.ValidateObjectMetaAccessor(accessor, s.res.namespaced,
		apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, s.validateSchema(obj, nil)...)
}

func (s strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	newMeta, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	oldMeta, err := meta.Accessor(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := apimachineryvalidation.ValidateObjectMetaAccessorUpdate(newMeta, oldMeta, field.NewPath("metadata"))
	return append(errs, s.validateSchema(obj, old)...)
}

// validateSchema checks obj against the CRD's OpenAPI schema (with old,
// as an update: ratcheting lets unchanged invalid values stay).
func (s strategy) validateSchema(obj, old runtime.Object) field.ErrorList {
	content, err := schemaContent(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if old == nil {
		return validation.ValidateCustomResource(nil, content, s.res.validator)
	}
	oldContent, err := schemaContent(old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return validation.ValidateCustomResourceUpdate(nil, content, oldContent, s.res.validator)
}

// schemaContent is obj as the schema validates it: without metadata,
// which has been validated on its own, nor apiVersion and kind, which are
// the internal version's here.
func schemaContent(obj runtime.Object) (map[string]any, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(content, "metadata")
	delete(content, "apiVersion")
	delete(content, "kind")
	return content, nil
}
