package reportsserver

import (
	"slices"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// Scheme holds the report types the server serves, and Codecs their
// serializers.
var (
	Scheme = runtime.NewScheme()
	Codecs = serializer.NewCodecFactory(Scheme)
)

// withoutProtobuf is a NegotiatedSerializer that does not offer protobuf:
// the report types have no protobuf encoding (as custom resources have
// none), and a client that prefers it, as kube-controller-manager's
// namespace and garbage collectors do, must be answered in JSON, its
// second choice, rather than get an error: otherwise a namespace holding
// reports is never deleted.
type withoutProtobuf struct{ runtime.NegotiatedSerializer }

func (s withoutProtobuf) SupportedMediaTypes() []runtime.SerializerInfo {
	return slices.DeleteFunc(slices.Clone(s.NegotiatedSerializer.SupportedMediaTypes()), func(info runtime.SerializerInfo) bool {
		return info.MediaType == runtime.ContentTypeProtobuf
	})
}

// serving is what the server negotiates responses with.
var serving runtime.NegotiatedSerializer = withoutProtobuf{Codecs}

func init() {
	utilruntime.Must(v1alpha2.AddToScheme(Scheme))
	utilruntime.Must(openreportsv1alpha1.AddToScheme(Scheme))
	// The API machinery converts every request to a group's internal
	// version. These APIs have one version each, so their Go types serve
	// as the internal version too, and that conversion is a copy.
	for gk, types := range goTypes {
		internal := schema.GroupVersion{Group: gk.Group, Version: runtime.APIVersionInternal}
		Scheme.AddKnownTypeWithName(internal.WithKind(gk.Kind), types[0]())
		Scheme.AddKnownTypeWithName(internal.WithKind(gk.Kind+"List"), types[1]())
	}
	// What every API server registers for discovery and options.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{},
		&metav1.APIGroup{}, &metav1.APIResourceList{})
}
