// Package clitest runs Kyverno CLI test suites (cli.kyverno.io/v1alpha1
// Test documents, usually kyverno-test.yaml) against charter's engine and
// compares every expected result the way `kyverno test` does.
//
// The package is split by stage: suite.go holds the file formats, load.go
// finds and strictly decodes them, inputs.go reads what a suite points at
// (policies, resources, values, user info, cluster resources), compare.go
// expands expected results into rows and judges them, run.go evaluates
// suites concurrently, and report.go renders the rows.
//
// # How a suite drives the engine
//
// Policies are compiled once per distinct list of policy files, with the
// suite's exceptions (engine.Compile, engine.WithExceptions); the set is
// shared by the suites evaluated concurrently. A policy with a
// CompileError has its rows reported as skipped ("Invalid policy") while
// the rest run. A policy declared twice (one kind, namespace and name) is
// an error of the suite naming both files; policies of different kinds
// may share a name, and an expected result's flags (isValidatingPolicy,
// ...) pick the kind its row is about.
//
// For each operation the results ask for, each resource becomes a request:
// CREATE of the object; UPDATE with the object as its own old object;
// DELETE with no object, the old object, and Kind, Namespace and Name set.
// Mutation runs first (mutate-existing included, against the suite's
// resources, targetResources, clusterResources and cloneSourceResource
// documents), validation sees the mutated object, and generation runs
// with engine.WithCLIGeneration, as Kyverno's CLI does (spec §9.4 row 50).
// patchedResources and generatedResource(s) are compared in patched.go.
//
// The values file answers the engine's Values hook (values.go):
// globalValues overlaid with policies[].resources[].values (matched by
// resource name) are variables for every rule; policies[].rules[].values
// are set before that rule's context entries load, their keys being dotted
// variable paths ("request.namespace", "imageData.configData.created")
// that also stand in for configMap, apiCall and imageRegistry entries;
// foreachValues give the i-th foreach element its variables by position.
// Values files name the rules written in the policy, so autogen rules
// (autogen-x, autogen-cronjob-x) fall back to their source rule's values.
// A request.operation of UPDATE or DELETE among a policy's values for a
// resource makes that policy alone see that operation (Kyverno's CLI builds
// each policy's request on its own); an UPDATE keeps the resource as its
// own old object, which the conformance suite other/allowed-label-changes
// needs.
//
// Loaders: ConfigMaps and APICalls come from clusterResources (GETs of
// /api/v1/... and /apis/<group>/<version>/..., lists and single objects)
// and apiCallResponses (matched by urlPath or url, and method);
// GlobalContext from globalContextEntries; namespace labels from the values
// file's namespaceSelector and namespaces and from Namespace cluster
// resources. There is no image registry: suites mock imageRegistry entries
// through values.
package clitest

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// DefaultFileName is the test file name `charter test` looks for.
const DefaultFileName = "kyverno-test.yaml"

// Test is one `kind: Test` document. Every path in it is relative to the
// directory of the file that holds it.
type Test struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata,omitempty"`

	Policies         []string `json:"policies,omitempty"`
	Resources        []string `json:"resources,omitempty"`
	TargetResources  []string `json:"targetResources,omitempty"`
	ClusterResources []string `json:"clusterResources,omitempty"`
	ParamResources   []string `json:"paramResources,omitempty"`
	Exceptions       []string `json:"exceptions,omitempty"`
	// Variables names a `kind: Values` file; Values is the same inline.
	Variables string      `json:"variables,omitempty"`
	Values    *ValuesSpec `json:"values,omitempty"`
	UserInfo  string      `json:"userinfo,omitempty"`
	// Context names a `kind: Context` file used by CEL policies.
	Context       string   `json:"context,omitempty"`
	JSONPayload   string   `json:"jsonPayload,omitempty"` // deprecated: jsonPayloads
	JSONPayloads  []string `json:"jsonPayloads,omitempty"`
	HTTPPayloads  []string `json:"httpPayloads,omitempty"`
	EnvoyPayloads []string `json:"envoyPayloads,omitempty"`

	APICallResponses     []APICallResponse    `json:"apiCallResponses,omitempty"`
	GlobalContextEntries []GlobalContextEntry `json:"globalContextEntries,omitempty"`

	Results []TestResult `json:"results,omitempty"`
}

// TestResult is one expected outcome: a policy (and rule) applied to some
// resources gives a result.
type TestResult struct {
	// Policy is the policy name, or namespace/name for a namespaced Policy;
	// only the name is compared.
	Policy string `json:"policy"`
	// Rule names the rule; responses of its autogen rules match too. Empty
	// means every rule of the policy.
	Rule string `json:"rule,omitempty"`

	IsValidatingAdmissionPolicy bool `json:"isValidatingAdmissionPolicy,omitempty"`
	IsMutatingAdmissionPolicy   bool `json:"isMutatingAdmissionPolicy,omitempty"`
	IsValidatingPolicy          bool `json:"isValidatingPolicy,omitempty"`
	IsMutatingPolicy            bool `json:"isMutatingPolicy,omitempty"`
	IsGeneratingPolicy          bool `json:"isGeneratingPolicy,omitempty"`
	IsDeletingPolicy            bool `json:"isDeletingPolicy,omitempty"`
	IsImageValidatingPolicy     bool `json:"isImageValidatingPolicy,omitempty"`

	// Result is pass|fail|skip|warn|error; Status is its deprecated name.
	Result string `json:"result,omitempty"`
	Status string `json:"status,omitempty"`
	// Kind is informational: it is never used to pick responses.
	Kind string `json:"kind,omitempty"`
	// Operation is CREATE (default), UPDATE or DELETE.
	Operation string `json:"operation,omitempty"`

	// Resources lists resource names or namespace/name pairs.
	Resources     []string       `json:"resources,omitempty"`
	ResourceSpecs []ResourceSpec `json:"resourceSpecs,omitempty"`
	// Resource and Namespace are the deprecated single-resource form.
	Resource  string `json:"resource,omitempty"`
	Namespace string `json:"namespace,omitempty"`

	PatchedResources       string   `json:"patchedResources,omitempty"`
	GeneratedResource      string   `json:"generatedResource,omitempty"`
	GeneratedResources     []string `json:"generatedResources,omitempty"`
	CloneSourceResource    string   `json:"cloneSourceResource,omitempty"`
	FailOnMissingResources bool     `json:"failOnMissingResources,omitempty"`
}

// Expected returns the expected result, honouring the deprecated status field.
func (r *TestResult) Expected() string {
	if r.Result != "" {
		return r.Result
	}
	return r.Status
}

// PolicyName is the last segment of Policy: Kyverno compares names only.
func (r *TestResult) PolicyName() string {
	for i := len(r.Policy) - 1; i >= 0; i-- {
		if r.Policy[i] == '/' {
			return r.Policy[i+1:]
		}
	}
	return r.Policy
}

// PolicyKinds are the kinds of policy the entry's flags name:
// isValidatingPolicy the ValidatingPolicy kinds and so on, no flag
// kyverno.io's ClusterPolicy and Policy.
func (r *TestResult) PolicyKinds() []string {
	switch {
	case r.IsValidatingPolicy:
		return []string{policiesv1.ValidatingPolicyKind, policiesv1.NamespacedValidatingPolicyKind}
	case r.IsMutatingPolicy:
		return []string{policiesv1.MutatingPolicyKind, policiesv1.NamespacedMutatingPolicyKind}
	case r.IsGeneratingPolicy:
		return []string{policiesv1.GeneratingPolicyKind, policiesv1.NamespacedGeneratingPolicyKind}
	case r.IsImageValidatingPolicy:
		return []string{policiesv1.ImageValidatingPolicyKind, policiesv1.NamespacedImageValidatingPolicyKind}
	case r.IsDeletingPolicy:
		return []string{policiesv1.DeletingPolicyKind, policiesv1.NamespacedDeletingPolicyKind}
	case r.IsValidatingAdmissionPolicy, r.IsMutatingAdmissionPolicy:
		// charter does not evaluate these kinds.
		return nil
	}
	return []string{kyvernov1.ClusterPolicyKind, kyvernov1.PolicyKind}
}

// ResourceSpec selects resources by group, version, kind, namespace and name.
type ResourceSpec struct {
	Group       string `json:"group,omitempty"`
	Version     string `json:"version,omitempty"`
	Kind        string `json:"kind,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Name        string `json:"name,omitempty"`
}

// APICallResponse mocks one HTTP endpoint for apiCall context entries.
type APICallResponse struct {
	URL      string              `json:"url,omitempty"`
	URLPath  string              `json:"urlPath,omitempty"`
	Method   string              `json:"method,omitempty"`
	Response APICallResponseBody `json:"response"`
}

// APICallResponseBody is the canned answer of an APICallResponse.
type APICallResponseBody struct {
	StatusCode int `json:"statusCode,omitempty"`
	Body       any `json:"body,omitempty"`
}

// GlobalContextEntry mocks a GlobalContextEntry by name.
type GlobalContextEntry struct {
	Name          string   `json:"name"`
	Data          any      `json:"data,omitempty"`
	Resources     []any    `json:"resources,omitempty"`
	ResourceFiles []string `json:"resourceFiles,omitempty"`
	// FieldPath is a JMESPath that narrows the data; Projections, when
	// set, make the entry's data the map of their names to their results.
	FieldPath   string                    `json:"fieldPath,omitempty"`
	Projections []GlobalContextProjection `json:"projections,omitempty"`
}

// GlobalContextProjection names a JMESPath result over an entry's data, as
// a GlobalContextEntry's spec.projections do. Kyverno's CLI mock spells the
// expression path; the GlobalContextEntry CRD spells it jmesPath.
type GlobalContextProjection struct {
	Name     string `json:"name"`
	JMESPath string `json:"jmesPath,omitempty"`
	Path     string `json:"path,omitempty"`
}

func (p GlobalContextProjection) expression() string {
	if p.JMESPath != "" {
		return p.JMESPath
	}
	return p.Path
}

// Values is a `kind: Values` file.
type Values struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata,omitempty"`
	ValuesSpec      `json:",inline"`
}

// ValuesSpec pins variables: globally, per policy, per rule and per resource,
// and supplies namespace labels for namespaceSelector matching.
type ValuesSpec struct {
	GlobalValues       map[string]any      `json:"globalValues,omitempty"`
	Policies           []PolicyValues      `json:"policies,omitempty"`
	NamespaceSelectors []NamespaceSelector `json:"namespaceSelector,omitempty"`
	Namespaces         []corev1.Namespace  `json:"namespaces,omitempty"`
	Subresources       []Subresource       `json:"subresources,omitempty"`
}

// PolicyValues holds the values of one policy.
type PolicyValues struct {
	Name      string           `json:"name"`
	Resources []ResourceValues `json:"resources,omitempty"`
	Rules     []RuleValues     `json:"rules,omitempty"`
}

// ResourceValues holds values used when the policy meets a resource by name.
type ResourceValues struct {
	Name   string         `json:"name"`
	Values map[string]any `json:"values,omitempty"`
}

// RuleValues holds values for one rule; ForeachValues feeds foreach elements.
type RuleValues struct {
	Name          string           `json:"name"`
	Values        map[string]any   `json:"values,omitempty"`
	ForeachValues map[string][]any `json:"foreachValues,omitempty"`
}

// NamespaceSelector gives a namespace its labels.
type NamespaceSelector struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Subresource describes a subresource (pods/exec, deployments/scale) and its
// parent so requests for it can be matched.
type Subresource struct {
	Subresource    metav1.APIResource `json:"subresource"`
	ParentResource metav1.APIResource `json:"parentResource"`
}

// UserInfo is a `kind: UserInfo` file: who sends the request.
type UserInfo struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta         `json:"metadata,omitempty"`
	Roles           []string                  `json:"roles,omitempty"`
	ClusterRoles    []string                  `json:"clusterRoles,omitempty"`
	AdmissionUser   authenticationv1.UserInfo `json:"userInfo,omitempty"`
}

// ClusterResource is a `kind: ClusterResource` file: objects that exist in the
// (simulated) cluster, for configMap and apiCall lookups.
type ClusterResource struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta   `json:"metadata,omitempty"`
	Spec            ClusterResourceSpec `json:"spec"`
}

// ClusterResourceSpec lists CRD files and inline objects.
type ClusterResourceSpec struct {
	CRDs      []string         `json:"crds,omitempty"`
	Resources []map[string]any `json:"resources,omitempty"`
}
