package mpol

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// builtinTypes is the type converter of an ApplyConfiguration merge: the
// built-in kinds' schemas as client-go ships them (what Kyverno's CLI uses
// too), and for any other kind (a custom resource) a schema deduced from
// the object, whose maps merge and whose lists are atomic, so a merge into
// one is refused rather than replacing it.
type builtinTypes struct {
	builtin managedfields.TypeConverter
	deduced managedfields.TypeConverter
}

var (
	mutationTypesOnce sync.Once
	mutationTypes     *builtinTypes
)

func mutationTypeConverter() managedfields.TypeConverter {
	mutationTypesOnce.Do(func() {
		mutationTypes = &builtinTypes{
			builtin: applyconfigurations.NewTypeConverter(clientgoscheme.Scheme),
			deduced: managedfields.NewDeducedTypeConverter(),
		}
	})
	return mutationTypes
}

func (t *builtinTypes) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if clientgoscheme.Scheme.Recognizes(obj.GetObjectKind().GroupVersionKind()) {
		return t.builtin.ObjectToTyped(obj, opts...)
	}
	return t.deduced.ObjectToTyped(obj, opts...)
}

func (t *builtinTypes) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return t.builtin.TypedToObject(v)
}
