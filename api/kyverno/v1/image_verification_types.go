package v1

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ImageVerificationType is the signature format an ImageVerification checks.
// +kubebuilder:validation:Enum=Cosign;SigstoreBundle;Notary
type ImageVerificationType string

// Image verification types.
const (
	Cosign         ImageVerificationType = "Cosign"
	SigstoreBundle ImageVerificationType = "SigstoreBundle"
	Notary         ImageVerificationType = "Notary"
)

// ImageVerification verifies image signatures and attestations, and may
// replace image tags by digests. Booleans whose Kyverno default is true are
// pointers; read them through the Is* helpers.
type ImageVerification struct {
	// FailureAction says whether a failure blocks the request.
	// +optional
	FailureAction *ValidationFailureAction `json:"failureAction,omitempty"`

	// Type is the signature format; Cosign when empty.
	// +optional
	Type ImageVerificationType `json:"type,omitempty"`

	// Image is a single image reference. Deprecated: use ImageReferences.
	// +optional
	Image string `json:"image,omitempty"`

	// ImageReferences are image reference patterns (wildcards allowed).
	// +optional
	ImageReferences []string `json:"imageReferences,omitempty"`

	// SkipImageReferences are image reference patterns to skip.
	// +optional
	SkipImageReferences []string `json:"skipImageReferences,omitempty"`

	// Key is a public key. Deprecated: use Attestors.
	// +optional
	Key string `json:"key,omitempty"`

	// Roots are root certificates for keyless signing. Deprecated: use Attestors.
	// +optional
	Roots string `json:"roots,omitempty"`

	// Subject is the keyless signing subject. Deprecated: use Attestors.
	// +optional
	Subject string `json:"subject,omitempty"`

	// Issuer is the keyless signing issuer. Deprecated: use Attestors.
	// +optional
	Issuer string `json:"issuer,omitempty"`

	// AdditionalExtensions are certificate extensions. Deprecated: use Attestors.
	// +optional
	AdditionalExtensions map[string]string `json:"additionalExtensions,omitempty"`

	// Attestors verify the image signatures.
	// +optional
	Attestors []AttestorSet `json:"attestors,omitempty"`

	// Attestations verify in-toto attestations of the image.
	// +optional
	Attestations []Attestation `json:"attestations,omitempty"`

	// Annotations the signature must carry. Deprecated: use Attestors.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Repository is an alternate OCI repository for the signatures.
	// +optional
	Repository string `json:"repository,omitempty"`

	// CosignOCI11 reads cosign signatures stored as OCI 1.1 referrers.
	// +optional
	CosignOCI11 bool `json:"cosignOCI11,omitempty"`

	// MutateDigest replaces tags by digests; true when absent.
	// +optional
	MutateDigest *bool `json:"mutateDigest,omitempty"`

	// VerifyDigest requires images to be referenced by digest; true when absent.
	// +optional
	VerifyDigest *bool `json:"verifyDigest,omitempty"`

	// Validation checks the verified images with conditions.
	// +optional
	Validation ValidateImageVerification `json:"validate,omitzero"`

	// Required requires every matching image to be verified; true when absent.
	// +optional
	Required *bool `json:"required,omitempty"`

	// ImageRegistryCredentials provides credentials for the registry.
	// +optional
	ImageRegistryCredentials *ImageRegistryCredentials `json:"imageRegistryCredentials,omitempty"`

	// UseCache caches verification results; true when absent.
	// +optional
	UseCache *bool `json:"useCache,omitempty"`
}

// IsMutateDigest returns MutateDigest, true when absent.
func (iv *ImageVerification) IsMutateDigest() bool { return boolOr(iv.MutateDigest, true) }

// IsVerifyDigest returns VerifyDigest, true when absent.
func (iv *ImageVerification) IsVerifyDigest() bool { return boolOr(iv.VerifyDigest, true) }

// IsRequired returns Required, true when absent.
func (iv *ImageVerification) IsRequired() bool { return boolOr(iv.Required, true) }

// IsUseCache returns UseCache, true when absent.
func (iv *ImageVerification) IsUseCache() bool { return boolOr(iv.UseCache, true) }

// GetType returns Type, Cosign when empty.
func (iv *ImageVerification) GetType() ImageVerificationType {
	if iv.Type == "" {
		return Cosign
	}
	return iv.Type
}

// ValidateImageVerification checks verified images with deny conditions.
type ValidateImageVerification struct {
	// Message is reported when validation fails.
	// +optional
	Message string `json:"message,omitempty"`

	// Deny fails the image when its conditions pass.
	// +optional
	Deny *Deny `json:"deny,omitempty"`
}

// AttestorSet is a set of attestors of which Count must verify (all when
// Count is absent).
type AttestorSet struct {
	// Count is the number of entries that must verify.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Count *int `json:"count,omitempty"`

	// Entries are the attestors.
	// +optional
	Entries []Attestor `json:"entries,omitempty"`
}

// Attestor verifies a signature with keys, certificates or keyless signing,
// or nests another AttestorSet.
type Attestor struct {
	// Keys are public keys.
	// +optional
	Keys *StaticKeyAttestor `json:"keys,omitempty"`

	// Certificates are certificates.
	// +optional
	Certificates *CertificateAttestor `json:"certificates,omitempty"`

	// Keyless verifies keyless (Fulcio) signatures.
	// +optional
	Keyless *KeylessAttestor `json:"keyless,omitempty"`

	// Attestor is a nested AttestorSet, kept as raw JSON because CRD schemas
	// cannot recurse.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Attestor *apiextv1.JSON `json:"attestor,omitempty"`

	// Annotations the signature must carry.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Repository is an alternate OCI repository for the signatures.
	// +optional
	Repository string `json:"repository,omitempty"`

	// SignatureAlgorithm is the signature digest algorithm. Deprecated: set it
	// under keys.
	// +optional
	SignatureAlgorithm string `json:"signatureAlgorithm,omitempty"`
}

// StaticKeyAttestor verifies with public keys.
type StaticKeyAttestor struct {
	// PublicKeys are PEM public keys, or a reference k8s://namespace/secret.
	// +optional
	PublicKeys string `json:"publicKeys,omitempty"`

	// SignatureAlgorithm is the digest algorithm; sha256 when empty.
	// +optional
	SignatureAlgorithm string `json:"signatureAlgorithm,omitempty"`

	// KMS is a key management service URI.
	// +optional
	KMS string `json:"kms,omitempty"`

	// Secret holds the public key.
	// +optional
	Secret *SecretReference `json:"secret,omitempty"`

	// Rekor configures the transparency log.
	// +optional
	Rekor *Rekor `json:"rekor,omitempty"`

	// CTLog configures the certificate transparency log.
	// +optional
	CTLog *CTLog `json:"ctlog,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// Name of the Secret.
	Name string `json:"name"`
	// Namespace of the Secret.
	Namespace string `json:"namespace"`
}

// CertificateAttestor verifies with certificates.
type CertificateAttestor struct {
	// Certificate is a PEM certificate.
	// +optional
	Certificate string `json:"cert,omitempty"`

	// CertificateChain is a PEM certificate chain.
	// +optional
	CertificateChain string `json:"certChain,omitempty"`

	// Rekor configures the transparency log.
	// +optional
	Rekor *Rekor `json:"rekor,omitempty"`

	// CTLog configures the certificate transparency log.
	// +optional
	CTLog *CTLog `json:"ctlog,omitempty"`
}

// KeylessAttestor verifies keyless signatures.
type KeylessAttestor struct {
	// Rekor configures the transparency log.
	// +optional
	Rekor *Rekor `json:"rekor,omitempty"`

	// CTLog configures the certificate transparency log.
	// +optional
	CTLog *CTLog `json:"ctlog,omitempty"`

	// Issuer is the certificate issuer.
	// +optional
	Issuer string `json:"issuer,omitempty"`

	// IssuerRegExp is a regular expression for the issuer.
	// +optional
	IssuerRegExp string `json:"issuerRegExp,omitempty"`

	// Subject is the certificate subject.
	// +optional
	Subject string `json:"subject,omitempty"`

	// SubjectRegExp is a regular expression for the subject.
	// +optional
	SubjectRegExp string `json:"subjectRegExp,omitempty"`

	// Roots are PEM root certificates.
	// +optional
	Roots string `json:"roots,omitempty"`

	// AdditionalExtensions are certificate extensions to match.
	// +optional
	AdditionalExtensions map[string]string `json:"additionalExtensions,omitempty"`
}

// Rekor configures the Rekor transparency log.
type Rekor struct {
	// URL of the Rekor server.
	// +optional
	URL string `json:"url,omitempty"`

	// RekorPubKey is the Rekor public key.
	// +optional
	RekorPubKey string `json:"pubkey,omitempty"`

	// IgnoreTlog skips transparency log verification.
	// +optional
	IgnoreTlog bool `json:"ignoreTlog,omitempty"`
}

// CTLog configures the certificate transparency log.
type CTLog struct {
	// IgnoreSCT skips the signed certificate timestamp check.
	// +optional
	IgnoreSCT bool `json:"ignoreSCT,omitempty"`

	// CTLogPubKey is the CT log public key.
	// +optional
	CTLogPubKey string `json:"pubkey,omitempty"`

	// TSACertChain is the timestamp authority certificate chain.
	// +optional
	TSACertChain string `json:"tsaCertChain,omitempty"`
}

// Attestation verifies an in-toto attestation of the image.
type Attestation struct {
	// Name is the name the attestation is available under in conditions.
	// +optional
	Name string `json:"name,omitempty"`

	// PredicateType is the attestation predicate type. Deprecated: use Type.
	// +optional
	PredicateType string `json:"predicateType,omitempty"`

	// Type is the attestation predicate type.
	// +optional
	Type string `json:"type,omitempty"`

	// Attestors verify the attestation signatures.
	// +optional
	Attestors []AttestorSet `json:"attestors,omitempty"`

	// Conditions check the attestation's payload.
	// +optional
	Conditions []AnyAllConditions `json:"conditions,omitempty"`
}

// ImageRegistryCredentialsProvider names a cloud credential helper.
// +kubebuilder:validation:Enum=default;amazon;azure;google;github
type ImageRegistryCredentialsProvider string

// ImageRegistryCredentials provides credentials for registry access.
type ImageRegistryCredentials struct {
	// AllowInsecureRegistry allows plain HTTP registries.
	// +optional
	AllowInsecureRegistry bool `json:"allowInsecureRegistry,omitempty"`

	// Providers are cloud credential helpers to use.
	// +optional
	Providers []ImageRegistryCredentialsProvider `json:"providers,omitempty"`

	// Secrets are names of image pull secrets in charter's namespace.
	// +optional
	Secrets []string `json:"secrets,omitempty"`
}

// ImageExtractorConfigs maps a kind to where its images are.
type ImageExtractorConfigs map[string][]ImageExtractorConfig

// ImageExtractorConfig says where in a custom resource images are.
type ImageExtractorConfig struct {
	// Path is a slash-separated path to the images; * expands lists and maps.
	Path string `json:"path"`

	// Value is the field under Path holding the image, when Path points to
	// objects.
	// +optional
	Value string `json:"value,omitempty"`

	// Name is the entry the images appear under, images.<name>; "custom"
	// when empty.
	// +optional
	Name string `json:"name,omitempty"`

	// Key is the field under Path that names each image uniquely.
	// +optional
	Key string `json:"key,omitempty"`

	// JMESPath is applied to each extracted image value.
	// +optional
	JMESPath string `json:"jmesPath,omitempty"`
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}
