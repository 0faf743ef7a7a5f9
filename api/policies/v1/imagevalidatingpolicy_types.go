package v1

import (
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Kinds of the image validating policies.
const (
	ImageValidatingPolicyKind           = "ImageValidatingPolicy"
	NamespacedImageValidatingPolicyKind = "NamespacedImageValidatingPolicy"
)

// ImageValidatingPolicy verifies the signatures and attestations of the
// container images a resource names, with CEL expressions over the
// verification functions, in every namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=imagevalidatingpolicies,scope=Cluster,shortName=ivpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type ImageValidatingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy matches and how it verifies images.
	Spec ImageValidatingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// ImageValidatingPolicyList is a list of ImageValidatingPolicy.
//
// +kubebuilder:object:root=true
type ImageValidatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImageValidatingPolicy `json:"items"`
}

// NamespacedImageValidatingPolicy is an ImageValidatingPolicy that acts
// only on resources of its own namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespacedimagevalidatingpolicies,scope=Namespaced,shortName=nivpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type NamespacedImageValidatingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy matches and how it verifies images.
	Spec ImageValidatingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// NamespacedImageValidatingPolicyList is a list of
// NamespacedImageValidatingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedImageValidatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedImageValidatingPolicy `json:"items"`
}

// ImageValidatingPolicySpec is what an ImageValidatingPolicy matches and
// how it verifies images (Kyverno's v1alpha1 fields).
type ImageValidatingPolicySpec struct {
	// MatchConstraints select the requests the policy validates.
	// +optional
	MatchConstraints *admissionregistrationv1.MatchResources `json:"matchConstraints,omitempty"`

	// FailurePolicy says what a matchCondition that cannot be evaluated
	// does: Fail (default) makes it an error, Ignore skips the policy.
	// +optional
	// +kubebuilder:validation:Enum=Ignore;Fail
	FailurePolicy *admissionregistrationv1.FailurePolicyType `json:"failurePolicy,omitempty"`

	// AuditAnnotations are CEL expressions whose string values go into the
	// policy's report results as properties.
	// +listType=atomic
	// +optional
	AuditAnnotations []admissionregistrationv1.AuditAnnotation `json:"auditAnnotations,omitempty"`

	// ValidationActions say what a failure does: Deny the request, Warn
	// the client, Audit in reports. Empty means Deny.
	// +listType=set
	// +kubebuilder:validation:items:Enum=Deny;Audit;Warn
	// +optional
	ValidationAction []admissionregistrationv1.ValidationAction `json:"validationActions,omitempty"`

	// MatchConditions must all hold for the policy to validate a request.
	// +listType=map
	// +listMapKey=name
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`

	// Variables are named CEL expressions, available as variables.<name>.
	// +listType=map
	// +listMapKey=name
	// +optional
	Variables []admissionregistrationv1.Variable `json:"variables,omitempty"`

	// ValidationConfigurations tune digest pinning and checks.
	// +optional
	ValidationConfigurations *ValidationConfiguration `json:"validationConfigurations,omitempty"`

	// MatchImageReferences select the images the policy verifies; an
	// image that matches none is skipped. Empty matches every image.
	// +optional
	MatchImageReferences []MatchImageReference `json:"matchImageReferences,omitempty"`

	// Credentials say how to reach the registries.
	// +optional
	Credentials *Credentials `json:"credentials,omitempty"`

	// Images are named CEL expressions returning lists of image
	// references, available as images.<name> beside the built-in
	// containers, initContainers and ephemeralContainers.
	// +optional
	Images []ImageExtractor `json:"images,omitempty"`

	// Attestors are the trusted signers, available as attestors.<name>.
	Attestors []Attestor `json:"attestors"`

	// Attestations are the attestation types the validations may check,
	// available as attestations.<name>.
	// +optional
	Attestations []Attestation `json:"attestations,omitempty"`

	// Validations are CEL expressions that must all hold; the first that
	// does not fails the policy.
	// +listType=atomic
	Validations []admissionregistrationv1.Validation `json:"validations"`

	// WebhookConfiguration tunes the policy's admission webhook.
	// +optional
	WebhookConfiguration *WebhookConfiguration `json:"webhookConfiguration,omitempty"`

	// EvaluationConfiguration says where the policy is evaluated.
	// +optional
	EvaluationConfiguration *EvaluationConfiguration `json:"evaluation,omitempty"`

	// AutogenConfiguration says for which Pod controllers the policy is
	// also applied.
	// +optional
	AutogenConfiguration *ImageValidatingPolicyAutogenConfiguration `json:"autogen,omitempty"`
}

// ImageValidatingPolicyAutogenConfiguration configures autogen.
type ImageValidatingPolicyAutogenConfiguration struct {
	// PodControllers selects the Pod controllers a Pod policy also applies
	// to.
	// +optional
	PodControllers *PodControllersGenerationConfiguration `json:"podControllers,omitempty"`
}

// ValidationConfiguration tunes digest pinning and checks; every field
// defaults to true.
type ValidationConfiguration struct {
	// MutateDigest pins matched images named by tag to their digest at
	// admission.
	// +optional
	MutateDigest *bool `json:"mutateDigest,omitempty"`
	// VerifyDigest fails a matched image named without a digest.
	// +optional
	VerifyDigest *bool `json:"verifyDigest,omitempty"`
	// Required fails a matched image that no policy of the request
	// verified.
	// +optional
	Required *bool `json:"required,omitempty"`
}

// MatchImageReference selects images by glob or CEL expression over ref.
type MatchImageReference struct {
	// Glob is a glob pattern over the image reference as written.
	// +optional
	Glob string `json:"glob,omitempty"`
	// Expression is a CEL expression over ref returning a bool.
	// +optional
	Expression string `json:"expression,omitempty"`
}

// ImageExtractor is a named CEL expression returning image references.
type ImageExtractor struct {
	// Name is the key under images.
	Name string `json:"name"`
	// Expression returns a list of strings.
	Expression string `json:"expression"`
}

// Credentials say how to reach the registries.
type Credentials struct {
	// AllowInsecureRegistry allows plain-HTTP registries.
	// +optional
	AllowInsecureRegistry bool `json:"allowInsecureRegistry,omitempty"`
	// Providers are the credential helpers to use (default, google,
	// azure, amazon, github).
	// +optional
	Providers []string `json:"providers,omitempty"`
	// Secrets are image pull secrets.
	// +optional
	Secrets []string `json:"secrets,omitempty"`
}

// Attestor is a trusted signer.
type Attestor struct {
	// Name is the key under attestors.
	Name string `json:"name"`
	// Cosign verifies cosign signatures.
	// +optional
	Cosign *Cosign `json:"cosign,omitempty"`
	// Notary verifies notation signatures.
	// +optional
	Notary *Notary `json:"notary,omitempty"`
}

// Cosign is a cosign attestor.
type Cosign struct {
	// Key is a public key.
	// +optional
	Key *Key `json:"key,omitempty"`
	// Keyless trusts certificates issued for an identity.
	// +optional
	Keyless *Keyless `json:"keyless,omitempty"`
	// Certificate trusts a certificate (and its chain).
	// +optional
	Certificate *Certificate `json:"certificate,omitempty"`
	// Source says where the signatures are stored.
	// +optional
	Source *Source `json:"source,omitempty"`
	// CTLog configures the transparency logs.
	// +optional
	CTLog *CTLog `json:"ctlog,omitempty"`
	// TUF configures the TUF repository of the trust roots.
	// +optional
	TUF *TUF `json:"tuf,omitempty"`
	// Annotations the signature payload must carry.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// TrustedRoot is a Sigstore trusted root (JSON).
	// +optional
	TrustedRoot *StringOrExpression `json:"trustedRoot,omitempty"`
}

// Key is a cosign public key.
type Key struct {
	// Data is a PEM public key.
	// +optional
	Data string `json:"data,omitempty"`
	// KMS is a key management service URI.
	// +optional
	KMS string `json:"kms,omitempty"`
	// HashAlgorithm is the signature hash (sha256 by default).
	// +optional
	HashAlgorithm string `json:"hashAlgorithm,omitempty"`
	// Expression computes the key.
	// +optional
	Expression string `json:"expression,omitempty"`
}

// Keyless trusts certificates issued for one of the identities.
type Keyless struct {
	// Identities are the accepted signers.
	Identities []Identity `json:"identities"`
	// Roots are PEM CA certificates.
	// +optional
	Roots string `json:"roots,omitempty"`
	// AdditionalExtensions are certificate extensions to match.
	// +optional
	AdditionalExtensions map[string]string `json:"additionalExtensions,omitempty"`
}

// Identity is an accepted keyless signer.
type Identity struct {
	// +optional
	Issuer string `json:"issuer,omitempty"`
	// +optional
	Subject string `json:"subject,omitempty"`
	// +optional
	IssuerRegExp string `json:"issuerRegExp,omitempty"`
	// +optional
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
}

// Certificate trusts a certificate and its chain.
type Certificate struct {
	// Certificate is a PEM certificate.
	// +optional
	Certificate *StringOrExpression `json:"cert,omitempty"`
	// CertificateChain is the PEM chain of the certificate.
	// +optional
	CertificateChain *StringOrExpression `json:"certChain,omitempty"`
}

// Source says where signatures are stored.
type Source struct {
	// Repository holds the signatures instead of the image's own.
	// +optional
	Repository string `json:"repository,omitempty"`
	// PullSecrets reach the repository.
	// +optional
	SignaturePullSecrets []corev1.LocalObjectReference `json:"PullSecrets,omitempty"`
	// TagPrefix prefixes the signature tags.
	// +optional
	TagPrefix string `json:"tagPrefix,omitempty"`
}

// CTLog configures the transparency logs.
type CTLog struct {
	// URL is the Rekor URL.
	// +optional
	URL string `json:"url,omitempty"`
	// RekorPubKey is the Rekor public key (PEM).
	// +optional
	RekorPubKey string `json:"rekorPubKey,omitempty"`
	// CTLogPubKey is the certificate transparency log public key (PEM).
	// +optional
	CTLogPubKey string `json:"ctLogPubKey,omitempty"`
	// TSACertChain is a timestamp authority chain (PEM).
	// +optional
	TSACertChain string `json:"tsaCertChain,omitempty"`
	// InsecureIgnoreTlog skips the transparency log check.
	// +optional
	InsecureIgnoreTlog bool `json:"insecureIgnoreTlog,omitempty"`
	// InsecureIgnoreSCT skips the SCT check.
	// +optional
	InsecureIgnoreSCT bool `json:"insecureIgnoreSCT,omitempty"`
}

// TUF configures a TUF repository.
type TUF struct {
	// +optional
	Root TUFRoot `json:"root,omitzero"`
	// +optional
	Mirror string `json:"mirror,omitempty"`
}

// TUFRoot is a TUF root, by path or inline.
type TUFRoot struct {
	// +optional
	Path string `json:"path,omitempty"`
	// +optional
	Data string `json:"data,omitempty"`
}

// Notary is a notation attestor.
type Notary struct {
	// +optional
	Certs *StringOrExpression `json:"certs,omitempty"`
	// +optional
	TSACerts *StringOrExpression `json:"tsaCerts,omitempty"`
}

// StringOrExpression is a value or a CEL expression computing it.
type StringOrExpression struct {
	// +optional
	Value string `json:"value,omitempty"`
	// +optional
	Expression string `json:"expression,omitempty"`
}

// Attestation is an attestation type the validations may check.
type Attestation struct {
	// Name is the key under attestations.
	Name string `json:"name"`
	// InToto is an in-toto attestation of the predicate type.
	// +optional
	InToto *InToto `json:"intoto,omitempty"`
	// Referrer is an OCI 1.1 referrer artifact of the type.
	// +optional
	Referrer *Referrer `json:"referrer,omitempty"`
}

// InToto names an in-toto predicate type.
type InToto struct {
	Type string `json:"type"`
}

// Referrer names an OCI referrer artifact type.
type Referrer struct {
	Type string `json:"type"`
}

// AdmissionEnabled is evaluation.admission.enabled, true by default.
func (s *ImageValidatingPolicySpec) AdmissionEnabled() bool {
	return s.EvaluationConfiguration.admissionEnabled()
}

// BackgroundEnabled is evaluation.background.enabled, true by default.
func (s *ImageValidatingPolicySpec) BackgroundEnabled() bool {
	return s.EvaluationConfiguration.backgroundEnabled()
}

// Actions returns the validation actions, [Deny] when none are set.
func (s *ImageValidatingPolicySpec) Actions() []admissionregistrationv1.ValidationAction {
	return validationActions(s.ValidationAction)
}

// HasAction reports whether the policy has the validation action.
func (s *ImageValidatingPolicySpec) HasAction(a admissionregistrationv1.ValidationAction) bool {
	return slices.Contains(s.Actions(), a)
}

// GetFailurePolicy is Fail unless Ignore is set.
func (s *ImageValidatingPolicySpec) GetFailurePolicy() admissionregistrationv1.FailurePolicyType {
	if s.FailurePolicy != nil && *s.FailurePolicy == admissionregistrationv1.Ignore {
		return admissionregistrationv1.Ignore
	}
	return admissionregistrationv1.Fail
}

func orTrue(b *bool) bool { return b == nil || *b }

// MutateDigest is validationConfigurations.mutateDigest, true by default.
func (s *ImageValidatingPolicySpec) MutateDigest() bool {
	return s.ValidationConfigurations == nil || orTrue(s.ValidationConfigurations.MutateDigest)
}

// VerifyDigest is validationConfigurations.verifyDigest, true by default.
func (s *ImageValidatingPolicySpec) VerifyDigest() bool {
	return s.ValidationConfigurations == nil || orTrue(s.ValidationConfigurations.VerifyDigest)
}

// Required is validationConfigurations.required, true by default.
func (s *ImageValidatingPolicySpec) Required() bool {
	return s.ValidationConfigurations == nil || orTrue(s.ValidationConfigurations.Required)
}

// KyvernoSpec is the policy's settings in ClusterPolicy terms, as
// ValidatingPolicySpec.KyvernoSpec: admission and background switches,
// failure policy, webhook timeout and failure action. It has no rules.
func (s *ImageValidatingPolicySpec) KyvernoSpec() *kyvernov1.Spec {
	v := ValidatingPolicySpec{
		ValidationAction:        s.ValidationAction,
		FailurePolicy:           s.FailurePolicy,
		WebhookConfiguration:    s.WebhookConfiguration,
		EvaluationConfiguration: s.EvaluationConfiguration,
	}
	return v.KyvernoSpec()
}

// ImageValidatingPolicyLike is what ImageValidatingPolicy and
// NamespacedImageValidatingPolicy have in common.
//
// +kubebuilder:object:generate=false
type ImageValidatingPolicyLike interface {
	kyvernov1.PolicyInterface
	// GetImageValidatingPolicySpec returns the spec (not a copy).
	GetImageValidatingPolicySpec() *ImageValidatingPolicySpec
}

var (
	_ ImageValidatingPolicyLike = (*ImageValidatingPolicy)(nil)
	_ ImageValidatingPolicyLike = (*NamespacedImageValidatingPolicy)(nil)
)

// GetImageValidatingPolicySpec returns the spec.
func (p *ImageValidatingPolicy) GetImageValidatingPolicySpec() *ImageValidatingPolicySpec {
	return &p.Spec
}

// GetSpec returns the policy's settings in ClusterPolicy terms.
func (p *ImageValidatingPolicy) GetSpec() *kyvernov1.Spec { return p.Spec.KyvernoSpec() }

// GetStatus returns the policy's status.
func (p *ImageValidatingPolicy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is false.
func (p *ImageValidatingPolicy) IsNamespaced() bool { return false }

// GetKind returns "ImageValidatingPolicy".
func (p *ImageValidatingPolicy) GetKind() string { return ImageValidatingPolicyKind }

// IsReady reports whether status.conditionStatus.ready is true.
func (p *ImageValidatingPolicy) IsReady() bool { return p.Status.ConditionStatus.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *ImageValidatingPolicy) CreateDeepCopy() kyvernov1.PolicyInterface { return p.DeepCopy() }

// GetImageValidatingPolicySpec returns the spec.
func (p *NamespacedImageValidatingPolicy) GetImageValidatingPolicySpec() *ImageValidatingPolicySpec {
	return &p.Spec
}

// GetSpec returns the policy's settings in ClusterPolicy terms.
func (p *NamespacedImageValidatingPolicy) GetSpec() *kyvernov1.Spec { return p.Spec.KyvernoSpec() }

// GetStatus returns the policy's status.
func (p *NamespacedImageValidatingPolicy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is true: the policy acts in its own namespace only.
func (p *NamespacedImageValidatingPolicy) IsNamespaced() bool { return true }

// GetKind returns "NamespacedImageValidatingPolicy".
func (p *NamespacedImageValidatingPolicy) GetKind() string {
	return NamespacedImageValidatingPolicyKind
}

// IsReady reports whether status.conditionStatus.ready is true.
func (p *NamespacedImageValidatingPolicy) IsReady() bool { return p.Status.ConditionStatus.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *NamespacedImageValidatingPolicy) CreateDeepCopy() kyvernov1.PolicyInterface {
	return p.DeepCopy()
}
