package v1

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ContextEntry adds a named variable to a rule's context. Exactly one source
// (ConfigMap, APICall, ImageRegistry, Variable or GlobalReference) is set.
type ContextEntry struct {
	// Name is the variable name the entry is stored under.
	Name string `json:"name"`

	// ConfigMap loads the data of a ConfigMap.
	// +optional
	ConfigMap *ConfigMapReference `json:"configMap,omitempty"`

	// APICall calls the Kubernetes API server or an HTTP service.
	// +optional
	APICall *ContextAPICall `json:"apiCall,omitempty"`

	// ImageRegistry loads an image's manifest and config from its registry.
	// +optional
	ImageRegistry *ImageRegistry `json:"imageRegistry,omitempty"`

	// Variable is a value or a JMESPath expression.
	// +optional
	Variable *Variable `json:"variable,omitempty"`

	// GlobalReference reads an entry of a GlobalContextEntry.
	// +optional
	GlobalReference *GlobalContextEntryReference `json:"globalReference,omitempty"`
}

// ConfigMapReference names a ConfigMap.
type ConfigMapReference struct {
	// Name of the ConfigMap.
	Name string `json:"name"`

	// Namespace of the ConfigMap; defaults to "default".
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Method is an HTTP method for an APICall.
// +kubebuilder:validation:Enum=GET;POST
type Method string

// HTTP methods of an APICall.
const (
	MethodGet  Method = "GET"
	MethodPost Method = "POST"
)

// APICall describes a call to the Kubernetes API server or an HTTP service.
type APICall struct {
	// URLPath is the path of a Kubernetes API request, e.g. /api/v1/namespaces.
	// +optional
	URLPath string `json:"urlPath,omitempty"`

	// Method is the HTTP method; GET when empty.
	// +optional
	Method Method `json:"method,omitempty"`

	// Data is the request body of a POST call, as key/value pairs.
	// +optional
	Data []RequestData `json:"data,omitempty"`

	// Service is an HTTP service to call instead of the API server.
	// +optional
	Service *ServiceCall `json:"service,omitempty"`
}

// ContextAPICall is an APICall whose result is stored in the context.
type ContextAPICall struct {
	APICall `json:",inline"`

	// Default is the value stored when the call fails.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Default *apiextv1.JSON `json:"default,omitempty"`

	// JMESPath is applied to the result before it is stored.
	// +optional
	JMESPath string `json:"jmesPath,omitempty"`
}

// RequestData is one key of a POST request body.
type RequestData struct {
	// Key is the JSON key.
	Key string `json:"key"`

	// Value is the JSON value; it may hold variables.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Value *apiextv1.JSON `json:"value"`
}

// ServiceCall is an HTTP call to a service.
type ServiceCall struct {
	// URL is the service URL.
	URL string `json:"url"`

	// Headers are HTTP headers to send.
	// +optional
	Headers []HTTPHeader `json:"headers,omitempty"`

	// CABundle is a PEM CA bundle to verify the service's certificate.
	// +optional
	CABundle string `json:"caBundle,omitempty"`
}

// HTTPHeader is one HTTP header.
type HTTPHeader struct {
	// Key is the header name.
	Key string `json:"key"`
	// Value is the header value.
	Value string `json:"value"`
}

// ImageRegistry loads image data from an OCI registry.
type ImageRegistry struct {
	// Reference is the image reference; it may hold variables.
	Reference string `json:"reference"`

	// JMESPath is applied to the image data before it is stored.
	// +optional
	JMESPath string `json:"jmesPath,omitempty"`

	// ImageRegistryCredentials provides credentials for the registry.
	// +optional
	ImageRegistryCredentials *ImageRegistryCredentials `json:"imageRegistryCredentials,omitempty"`
}

// Variable is a context value: a literal, a JMESPath expression, or both
// (the expression is applied to the value).
type Variable struct {
	// Value is any JSON value; it may hold variables.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Value *apiextv1.JSON `json:"value,omitempty"`

	// JMESPath is evaluated against Value, or against the whole context when
	// Value is absent.
	// +optional
	JMESPath string `json:"jmesPath,omitempty"`

	// Default is used when the expression yields nothing.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Default *apiextv1.JSON `json:"default,omitempty"`
}

// GlobalContextEntryReference reads a GlobalContextEntry.
type GlobalContextEntryReference struct {
	// Name of the GlobalContextEntry.
	Name string `json:"name"`

	// JMESPath is applied to the entry's data.
	// +optional
	JMESPath string `json:"jmesPath,omitempty"`
}
