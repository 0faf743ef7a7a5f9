package v2alpha1

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestGlobalContextEntrySpecValidate(t *testing.T) {
	tests := []struct {
		name, spec string
		// want is the faults joined by "; ", empty when valid.
		want string
	}{
		{name: "resource", spec: `{kubernetesResource: {version: v1, resource: configmaps}, projections: [{name: names, jmesPath: "[].metadata.name"}]}`},
		{name: "api call to a service", spec: `{apiCall: {service: {url: "https://registry.example/v2/_catalog"}, refreshInterval: 30s}}`},
		{name: "POST with data", spec: `{apiCall: {urlPath: /api/v1/namespaces, method: POST, data: [{key: a, value: 1}]}}`},
		{name: "no source", spec: `{}`, want: "spec: exactly one of kubernetesResource or apiCall is required"},
		{name: "both sources", spec: `{kubernetesResource: {version: v1, resource: pods}, apiCall: {urlPath: /api}}`,
			want: "spec: kubernetesResource and apiCall are mutually exclusive"},
		{name: "subresource", spec: `{kubernetesResource: {version: v1, resource: pods/log}}`,
			want: `spec.kubernetesResource.resource: "pods/log": a subresource cannot be cached`},
		{name: "relative urlPath", spec: `{apiCall: {urlPath: api/v1/pods}}`,
			want: `spec.apiCall.urlPath: "api/v1/pods": want an absolute path such as /api/v1/namespaces`},
		{name: "service without scheme", spec: `{apiCall: {service: {url: "registry.example"}}}`,
			want: `spec.apiCall.service.url: "registry.example": want an http or https URL`},
		{name: "no group beyond core v1", spec: `{kubernetesResource: {version: v2, resource: widgets}}`,
			want: `spec.kubernetesResource.group: required: only the core group's version v1 has no group, not "v2"`},
		{name: "zero refresh interval", spec: `{apiCall: {urlPath: /api, refreshInterval: 0s}}`,
			want: "spec.apiCall.refreshInterval: 0s: must be greater than 0 seconds"},
		{name: "data with GET", spec: `{apiCall: {urlPath: /api, data: [{key: a, value: 1}]}}`, want: "spec.apiCall.data: only a POST call sends data"},
		{name: "projections", spec: `{kubernetesResource: {version: v1, resource: pods}, projections: [{name: a.b, jmesPath: x}, {name: c, jmesPath: x}, {name: c, jmesPath: ""}]}`,
			want: `spec.projections[0].name: "a.b": must not contain a dot (policies read it as <entry>.<projection>); ` +
				`spec.projections[2].name: "c": duplicate; spec.projections[2].jmesPath: required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec GlobalContextEntrySpec
			if err := yaml.UnmarshalStrict([]byte(tt.spec), &spec); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(spec.Validate(), "; "); got != tt.want {
				t.Errorf("faults:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestExternalAPICallDefaults(t *testing.T) {
	var c ExternalAPICall
	if c.RefreshEvery() != 10*time.Minute || c.Retries() != 3 {
		t.Errorf("defaults %v, %d", c.RefreshEvery(), c.Retries())
	}
	c.RefreshInterval, c.RetryLimit = &metav1.Duration{Duration: time.Second}, 1
	if c.RefreshEvery() != time.Second || c.Retries() != 1 {
		t.Errorf("set %v, %d", c.RefreshEvery(), c.Retries())
	}
}

// TestProjectionNamedAsItsEntry: a projection may not take its entry's
// name, which policies read the entry by.
func TestProjectionNamedAsItsEntry(t *testing.T) {
	var spec GlobalContextEntrySpec
	if err := yaml.UnmarshalStrict([]byte(`{kubernetesResource: {version: v1, resource: pods}, projections: [{name: pods, jmesPath: x}, {name: other, jmesPath: x}]}`), &spec); err != nil {
		t.Fatal(err)
	}
	want := `spec.projections[0].name: "pods": must differ from the entry's own name`
	if got := strings.Join(spec.ValidateNamed("pods"), "; "); got != want {
		t.Errorf("faults %q, want %q", got, want)
	}
	if got := spec.ValidateNamed("entry"); len(got) > 0 {
		t.Errorf("faults %q for another name", got)
	}
}
