package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Validation checks a matching resource. Exactly one of Pattern, AnyPattern,
// Deny, ForEachValidation, PodSecurity, CEL, Manifests or Assert is set.
type Validation struct {
	// FailureAction says whether a failure blocks the request (Enforce) or is
	// only reported (Audit). It overrides the policy's validationFailureAction.
	// +optional
	FailureAction *ValidationFailureAction `json:"failureAction,omitempty"`

	// FailureActionOverrides set the failure action per namespace.
	// +optional
	FailureActionOverrides []ValidationFailureActionOverride `json:"failureActionOverrides,omitempty"`

	// AllowExistingViolations lets an update through when the old object
	// already violated the rule; true when absent.
	// +optional
	AllowExistingViolations *bool `json:"allowExistingViolations,omitempty"`

	// Message is reported when validation fails; it may hold variables.
	// +optional
	Message string `json:"message,omitempty"`

	// Manifests verifies signed Kubernetes YAML manifests.
	// +optional
	Manifests *Manifests `json:"manifests,omitempty"`

	// ForEachValidation applies validations to each element of a list.
	// +optional
	ForEachValidation []ForEachValidation `json:"foreach,omitempty"`

	// RawPattern is an overlay pattern the resource must match.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawPattern *apiextv1.JSON `json:"pattern,omitempty"`

	// RawAnyPattern is a list of patterns of which at least one must match.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawAnyPattern *apiextv1.JSON `json:"anyPattern,omitempty"`

	// Deny fails the resource when its conditions pass.
	// +optional
	Deny *Deny `json:"deny,omitempty"`

	// PodSecurity applies a Pod Security Standards profile.
	// +optional
	PodSecurity *PodSecurity `json:"podSecurity,omitempty"`

	// CEL validates with Common Expression Language expressions.
	// +optional
	CEL *CEL `json:"cel,omitempty"`

	// Assert is a kyverno-json assertion tree.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Assert *apiextv1.JSON `json:"assert,omitempty"`
}

// GetAllowExistingViolations returns AllowExistingViolations, true when absent.
func (v *Validation) GetAllowExistingViolations() bool {
	return v.AllowExistingViolations == nil || *v.AllowExistingViolations
}

// Deny fails validation when its conditions pass.
type Deny struct {
	// RawAnyAllConditions are the conditions, as {any, all} or as a plain
	// list (which means all); see ParseConditions.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawAnyAllConditions *apiextv1.JSON `json:"conditions,omitempty"`
}

// ForEachValidation applies a validation to each element of List.
type ForEachValidation struct {
	// List is a JMESPath expression yielding the elements.
	List string `json:"list"`

	// ElementScope says whether the pattern applies to the element (true) or
	// to the whole resource (false). When absent it applies to the element
	// if the pattern is an object.
	// +optional
	ElementScope *bool `json:"elementScope,omitempty"`

	// Context adds variables, evaluated per element.
	// +optional
	Context []ContextEntry `json:"context,omitempty"`

	// AnyAllConditions are preconditions evaluated per element.
	// +optional
	// +kubebuilder:validation:XPreserveUnknownFields
	AnyAllConditions *AnyAllConditions `json:"preconditions,omitempty"`

	// RawPattern is a pattern each element must match.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawPattern *apiextv1.JSON `json:"pattern,omitempty"`

	// RawAnyPattern is a list of patterns of which one must match.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawAnyPattern *apiextv1.JSON `json:"anyPattern,omitempty"`

	// Deny fails the element when its conditions pass.
	// +optional
	Deny *Deny `json:"deny,omitempty"`

	// ForEachValidation is a nested list of ForEachValidation, kept as raw
	// JSON because CRD schemas cannot recurse.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	ForEachValidation *apiextv1.JSON `json:"foreach,omitempty"`
}

// PodSecurityLevel is a Pod Security Standards profile.
// +kubebuilder:validation:Enum=privileged;baseline;restricted
type PodSecurityLevel string

// Pod Security Standards profiles.
const (
	PodSecurityPrivileged PodSecurityLevel = "privileged"
	PodSecurityBaseline   PodSecurityLevel = "baseline"
	PodSecurityRestricted PodSecurityLevel = "restricted"
)

// PodSecurity applies a Pod Security Standards profile.
type PodSecurity struct {
	// Level is the profile.
	// +optional
	Level PodSecurityLevel `json:"level,omitempty"`

	// Version is the Kubernetes minor version of the profile, e.g. v1.29 or
	// latest.
	// +optional
	// +kubebuilder:validation:Enum=v1.19;v1.20;v1.21;v1.22;v1.23;v1.24;v1.25;v1.26;v1.27;v1.28;v1.29;v1.30;v1.31;v1.32;v1.33;v1.34;v1.35;v1.36;v1.37;latest
	Version string `json:"version,omitempty"`

	// Exclude lists controls that are not checked.
	// +optional
	Exclude []PodSecurityStandard `json:"exclude,omitempty"`
}

// PodSecurityStandard exempts one Pod Security control.
type PodSecurityStandard struct {
	// ControlName is the control, e.g. "Capabilities" or "Host Namespaces".
	// +kubebuilder:validation:Enum=HostProcess;Host Namespaces;Privileged Containers;Capabilities;HostPath Volumes;Host Ports;AppArmor;SELinux;/proc Mount Type;Seccomp;Sysctls;Volume Types;Privilege Escalation;Running as Non-root;Running as Non-root user
	ControlName string `json:"controlName"`

	// Images limits the exemption to containers with these images
	// (wildcards allowed).
	// +optional
	Images []string `json:"images,omitempty"`

	// RestrictedField is the field path the exemption applies to, e.g.
	// spec.containers[*].securityContext.capabilities.add.
	// +optional
	RestrictedField string `json:"restrictedField,omitempty"`

	// Values are the allowed values of RestrictedField.
	// +optional
	Values []string `json:"values,omitempty"`
}

// CEL validates with Common Expression Language expressions, like a
// ValidatingAdmissionPolicy.
type CEL struct {
	// Generate asks for a ValidatingAdmissionPolicy to be generated.
	// +optional
	Generate *bool `json:"generate,omitempty"`

	// Expressions must all evaluate to true.
	// +optional
	Expressions []admissionregistrationv1.Validation `json:"expressions,omitempty"`

	// ParamKind is the kind of the parameter resource.
	// +optional
	ParamKind *admissionregistrationv1.ParamKind `json:"paramKind,omitempty"`

	// ParamRef selects the parameter resource.
	// +optional
	ParamRef *admissionregistrationv1.ParamRef `json:"paramRef,omitempty"`

	// AuditAnnotations are added to the audit event.
	// +optional
	AuditAnnotations []admissionregistrationv1.AuditAnnotation `json:"auditAnnotations,omitempty"`

	// Variables are named CEL expressions usable in Expressions.
	// +optional
	Variables []admissionregistrationv1.Variable `json:"variables,omitempty"`
}

// Manifests verifies signed Kubernetes YAML manifests.
type Manifests struct {
	// Attestors verify the manifest signatures.
	// +optional
	Attestors []AttestorSet `json:"attestors,omitempty"`

	// AnnotationDomain is the domain of the signature annotations;
	// cosign.sigstore.dev when empty.
	// +optional
	AnnotationDomain string `json:"annotationDomain,omitempty"`

	// IgnoreFields are fields that may differ from the signed manifest.
	// +optional
	IgnoreFields IgnoreFieldList `json:"ignoreFields,omitempty"`

	// DryRunOption configures the dry run used to check the manifest.
	// +optional
	DryRunOption DryRunOption `json:"dryRun,omitzero"`

	// Repository is an OCI repository holding the signatures.
	// +optional
	Repository string `json:"repository,omitempty"`
}

// DryRunOption configures a server-side dry run.
type DryRunOption struct {
	// Enable turns the dry run on.
	// +optional
	Enable bool `json:"enable,omitempty"`
	// Namespace the dry run creates objects in.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// IgnoreFieldList is a list of ObjectFieldBinding.
type IgnoreFieldList []ObjectFieldBinding

// ObjectFieldBinding names fields of some objects.
type ObjectFieldBinding struct {
	// Fields are field paths.
	// +optional
	Fields []string `json:"fields,omitempty"`
	// Objects select the objects.
	// +optional
	Objects []TargetObject `json:"objects,omitempty"`
}

// TargetObject names an object; empty fields match any.
type TargetObject struct {
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Group string `json:"group,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ValidationFailureActionOverride sets the failure action in some namespaces.
type ValidationFailureActionOverride struct {
	// Action is the failure action.
	// +optional
	Action ValidationFailureAction `json:"action,omitempty"`

	// Namespaces the action applies in (wildcards allowed).
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector selects the namespaces the action applies in.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}
