package v2alpha1

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// GlobalContextEntryKind is the kind of a GlobalContextEntry.
const GlobalContextEntryKind = "GlobalContextEntry"

// Condition types and reasons of a GlobalContextEntry's status.
const (
	// ConditionReady is True while the entry's data is loaded and
	// current: policies reading it get data; False while they get an
	// error.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the entry is being loaded for
	// the first time since its spec changed.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the entry cannot load until its spec
	// or charter's rights change (an invalid spec, a forbidden or unknown
	// resource).
	ConditionStalled = "Stalled"

	// ReasonSucceeded: the data is loaded.
	ReasonSucceeded = "Succeeded"
	// ReasonLoading: the first load is under way.
	ReasonLoading = "Loading"
	// ReasonInvalidSpec: the spec is invalid; the message names the field.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonForbidden: charter may not list or watch the resource.
	ReasonForbidden = "Forbidden"
	// ReasonUnknownResource: the API server does not serve the resource.
	ReasonUnknownResource = "UnknownResource"
	// ReasonCacheSyncFailed: the resource's watch failed.
	ReasonCacheSyncFailed = "CacheSyncFailed"
	// ReasonAPICallFailed: the API call failed (after its retries).
	ReasonAPICallFailed = "APICallFailed"
	// ReasonProjectionFailed: a projection's JMESPath failed on the data.
	ReasonProjectionFailed = "ProjectionFailed"
)

// Defaults of an apiCall entry, as Kyverno's.
const (
	DefaultRefreshInterval = 10 * time.Minute
	DefaultRetryLimit      = 3
)

// GlobalContextEntry declares data charter keeps in memory for policies to
// read: the objects of a Kubernetes resource, kept current by a watch, or
// the answer of an API call, refreshed on an interval.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName=gctxentry,categories=kyverno
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type == "Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="REFRESH INTERVAL",type=string,JSONPath=`.spec.apiCall.refreshInterval`
// +kubebuilder:printcolumn:name="LAST REFRESH",type=date,JSONPath=`.status.lastRefreshTime`
// +kubebuilder:printcolumn:name="MESSAGE",type=string,priority=1,JSONPath=`.status.conditions[?(@.type == "Ready")].message`
type GlobalContextEntry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec GlobalContextEntrySpec `json:"spec"`

	// +optional
	Status GlobalContextEntryStatus `json:"status,omitempty"`
}

// GlobalContextEntrySpec has exactly one source: kubernetesResource or
// apiCall.
//
// +kubebuilder:validation:XValidation:rule="has(self.kubernetesResource) != has(self.apiCall)",message="exactly one of kubernetesResource or apiCall is required"
type GlobalContextEntrySpec struct {
	// KubernetesResource caches the objects of a resource, kept current
	// by a watch; the entry's data is the list of the objects.
	// +optional
	KubernetesResource *KubernetesResource `json:"kubernetesResource,omitempty"`

	// APICall caches the answer of a call to the API server or a service,
	// made every refreshInterval.
	// +optional
	APICall *ExternalAPICall `json:"apiCall,omitempty"`

	// Projections are named JMESPath results over the data, computed on
	// each refresh; a policy reads one as "<entry>.<projection>".
	// +optional
	// +listType=map
	// +listMapKey=name
	Projections []GlobalContextEntryProjection `json:"projections,omitempty"`
}

// KubernetesResource names the resource whose objects an entry caches.
type KubernetesResource struct {
	// Group of the resource; empty for the core group.
	// +optional
	Group string `json:"group,omitempty"`
	// Version of the resource, e.g. v1.
	// +kubebuilder:validation:MinLength=1
	Version string `json:"version"`
	// Resource is the plural lower-case name, e.g. deployments.
	// +kubebuilder:validation:MinLength=1
	Resource string `json:"resource"`
	// Namespace restricts a namespaced resource to one namespace; empty
	// caches every namespace (and is the only choice for a cluster-scoped
	// resource).
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ExternalAPICall is an API call whose answer an entry caches.
type ExternalAPICall struct {
	kyvernov1.APICall `json:",inline"`

	// RefreshInterval is how often the call is made (default 10m).
	// +optional
	// +kubebuilder:default="10m"
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`

	// RetryLimit is how many times a failing call is tried before the
	// entry is not Ready (default 3).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	RetryLimit int `json:"retryLimit,omitempty"`
}

// GlobalContextEntryProjection is a named JMESPath result over an entry's
// data.
type GlobalContextEntryProjection struct {
	// Name the projection is read by, after the entry's name and a dot.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// JMESPath evaluated over the entry's data.
	// +kubebuilder:validation:MinLength=1
	JMESPath string `json:"jmesPath"`
}

// GlobalContextEntryStatus is what charter observed of the entry.
type GlobalContextEntryStatus struct {
	// ObservedGeneration is the generation the conditions are about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastRefreshTime is when the data was last loaded.
	// +optional
	LastRefreshTime *metav1.Time `json:"lastRefreshTime,omitempty"`
}

// GlobalContextEntryList is a list of GlobalContextEntries.
//
// +kubebuilder:object:root=true
type GlobalContextEntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalContextEntry `json:"items"`
}

// RefreshEvery returns the apiCall's refresh interval, defaulted.
func (c *ExternalAPICall) RefreshEvery() time.Duration {
	if c.RefreshInterval == nil || c.RefreshInterval.Duration <= 0 {
		return DefaultRefreshInterval
	}
	return c.RefreshInterval.Duration
}

// Retries returns the apiCall's retry limit, defaulted.
func (c *ExternalAPICall) Retries() int {
	if c.RetryLimit <= 0 {
		return DefaultRetryLimit
	}
	return c.RetryLimit
}

// ValidateNamed is Validate for the spec of the entry named name: a
// projection may not take the entry's own name either (Kyverno: "A
// projection entry requires a name different from the global context
// entry name"), as policies read the entry by it.
func (s *GlobalContextEntrySpec) ValidateNamed(name string) []string {
	faults := s.Validate()
	for i, p := range s.Projections {
		if p.Name != "" && p.Name == name {
			faults = append(faults, fmt.Sprintf("spec.projections[%d].name: %q: must differ from the entry's own name", i, p.Name))
		}
	}
	return faults
}

// Validate returns what is wrong with the spec, each fault naming its
// field from spec; nil when it is valid. JMESPath expressions are checked
// by whoever compiles them.
func (s *GlobalContextEntrySpec) Validate() []string {
	var faults []string
	add := func(format string, args ...any) { faults = append(faults, fmt.Sprintf(format, args...)) }
	switch {
	case s.KubernetesResource == nil && s.APICall == nil:
		add("spec: exactly one of kubernetesResource or apiCall is required")
	case s.KubernetesResource != nil && s.APICall != nil:
		add("spec: kubernetesResource and apiCall are mutually exclusive")
	}
	if r := s.KubernetesResource; r != nil {
		if r.Group == "" && r.Version != "" && r.Version != "v1" {
			// Kyverno: "A Resource entry requires a group"; only the
			// core group's v1 has none.
			add("spec.kubernetesResource.group: required: only the core group's version v1 has no group, not %q", r.Version)
		}
		if r.Version == "" {
			add("spec.kubernetesResource.version: required")
		}
		if r.Resource == "" {
			add("spec.kubernetesResource.resource: required")
		} else if strings.Contains(r.Resource, "/") {
			add("spec.kubernetesResource.resource: %q: a subresource cannot be cached", r.Resource)
		}
	}
	if c := s.APICall; c != nil {
		switch {
		case c.URLPath == "" && c.Service == nil:
			add("spec.apiCall: one of urlPath or service is required")
		case c.URLPath != "" && c.Service != nil:
			add("spec.apiCall: urlPath and service are mutually exclusive")
		case c.URLPath != "" && !strings.HasPrefix(c.URLPath, "/"):
			add("spec.apiCall.urlPath: %q: want an absolute path such as /api/v1/namespaces", c.URLPath)
		case c.Service != nil:
			if u, err := url.Parse(c.Service.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add("spec.apiCall.service.url: %q: want an http or https URL", c.Service.URL)
			}
		}
		if m := strings.ToUpper(string(c.Method)); m != "" && m != "GET" && m != "POST" {
			add("spec.apiCall.method: %q: want GET or POST", c.Method)
		}
		if len(c.Data) > 0 && strings.ToUpper(string(c.Method)) != "POST" {
			add("spec.apiCall.data: only a POST call sends data")
		}
		if c.RefreshInterval != nil && c.RefreshInterval.Duration <= 0 {
			// Kyverno: "A Resource entry requires a refresh interval
			// greater than 0 seconds"; absent, it is the default.
			add("spec.apiCall.refreshInterval: %s: must be greater than 0 seconds", c.RefreshInterval.Duration)
		}
		if c.RetryLimit < 0 {
			add("spec.apiCall.retryLimit: %d: must not be negative", c.RetryLimit)
		}
	}
	seen := map[string]bool{}
	for i, p := range s.Projections {
		switch {
		case p.Name == "":
			add("spec.projections[%d].name: required", i)
		case strings.Contains(p.Name, "."):
			add("spec.projections[%d].name: %q: must not contain a dot (policies read it as <entry>.<projection>)", i, p.Name)
		case seen[p.Name]:
			add("spec.projections[%d].name: %q: duplicate", i, p.Name)
		}
		seen[p.Name] = true
		if p.JMESPath == "" {
			add("spec.projections[%d].jmesPath: required", i)
		}
	}
	return faults
}
