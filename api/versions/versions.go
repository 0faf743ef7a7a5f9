// Package versions is the table of every apiVersion and kind of Kyverno's
// APIs that charter serves (the versions Kyverno 1.19 serves) and of the
// hub type each converts to: charter's code works with the hub types
// (kyverno.io/v1 ClusterPolicy and Policy, kyverno.io/v2 PolicyException,
// CleanupPolicy, ClusterCleanupPolicy and UpdateRequest, kyverno.io/v2alpha1
// GlobalContextEntry, policies.kyverno.io/v1), and an object written in any
// other served version is decoded into its own version's type and handed on
// as the hub type. The other versions embed their hub type, so conversion is
// a copy and loses nothing (the CRDs convert with strategy None).
package versions

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov1beta1 "github.com/charter-dev/charter/api/kyverno/v1beta1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	kyvernov2beta1 "github.com/charter-dev/charter/api/kyverno/v2beta1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	policiesv1alpha1 "github.com/charter-dev/charter/api/policies/v1alpha1"
	policiesv1beta1 "github.com/charter-dev/charter/api/policies/v1beta1"
	"github.com/charter-dev/charter/api/strict"
)

var builder = runtime.NewSchemeBuilder(
	kyvernov1.AddToScheme, kyvernov1beta1.AddToScheme, kyvernov2.AddToScheme,
	kyvernov2alpha1.AddToScheme, kyvernov2beta1.AddToScheme,
	policiesv1.AddToScheme, policiesv1alpha1.AddToScheme, policiesv1beta1.AddToScheme,
)

// AddToScheme registers every served version of Kyverno's kinds.
var AddToScheme = builder.AddToScheme

// Converter is implemented by the type of every served version that is
// not its kind's hub.
type Converter interface {
	// Hub returns a copy of the object as its hub type.
	Hub() runtime.Object
}

var scheme = runtime.NewScheme()

func init() { utilruntime.Must(AddToScheme(scheme)) }

// Served reports whether charter serves kind in apiVersion group/version
// (an object kind, not a list or the options every group version holds).
func Served(gvk schema.GroupVersionKind) bool {
	t, ok := scheme.AllKnownTypes()[gvk]
	return ok && strings.HasPrefix(t.PkgPath(), apiPackages) && !strings.HasSuffix(gvk.Kind, "List")
}

// apiPackages is the import path prefix of charter's API types.
const apiPackages = "github.com/charter-dev/charter/api/"

// ToHub returns obj as its hub type: a Converter's Hub, anything else
// unchanged.
func ToHub(obj runtime.Object) runtime.Object {
	if c, ok := obj.(Converter); ok {
		return c.Hub()
	}
	return obj
}

// Decode strictly decodes data (JSON), an object of a served gvk, and
// returns it as its hub type. A kind or version charter does not serve is
// an error naming it.
func Decode(gvk schema.GroupVersionKind, data []byte) (runtime.Object, error) {
	return decode(gvk, data, strict.Unmarshal)
}

// DecodeJSON is Decode for JSON that encoding/json wrote
// (strict.UnmarshalJSON): the CLI's documents, decoded from YAML already.
func DecodeJSON(gvk schema.GroupVersionKind, data []byte) (runtime.Object, error) {
	return decode(gvk, data, strict.UnmarshalJSON)
}

func decode(gvk schema.GroupVersionKind, data []byte, unmarshal func([]byte, any) error) (runtime.Object, error) {
	if !Served(gvk) {
		return nil, fmt.Errorf("%s %s is not served (charter serves the versions Kyverno 1.19 serves)", gvk.GroupVersion(), gvk.Kind)
	}
	obj, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := unmarshal(data, obj); err != nil {
		return nil, err
	}
	return ToHub(obj), nil
}
