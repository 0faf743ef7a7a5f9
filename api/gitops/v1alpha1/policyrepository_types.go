package v1alpha1

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyRepositoryKind is the kind of PolicyRepository.
const PolicyRepositoryKind = "PolicyRepository"

// Condition types of a PolicyRepository.
const (
	// ConditionReady is True when the last attempted revision was applied.
	ConditionReady = "Ready"
	// ConditionReconciling is True while a revision is being fetched or applied.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when reconciling cannot progress without a
	// change to the spec or the repository, e.g. an invalid policy.
	ConditionStalled = "Stalled"
	// ConditionSourceVerified is True when the commit's signature, or the
	// OCI artifact's cosign signature, verified.
	ConditionSourceVerified = "SourceVerified"
)

// Condition reasons of a PolicyRepository.
const (
	ReasonSucceeded   = "ReconciliationSucceeded"
	ReasonProgressing = "Progressing"
	ReasonFetchFailed = "GitOperationFailed"
	// ReasonOCIFetchFailed: the registry of an oci:// repository could
	// not be asked or read (Flux's reason for the same).
	ReasonOCIFetchFailed = "OCIOperationFailed"
	// ReasonArtifactInvalid: the OCI artifact is not in Flux's format, or
	// its tarball holds what charter never extracts (a link, a path
	// outside the folder); nothing is applied.
	ReasonArtifactInvalid    = "ArtifactInvalid"
	ReasonBuildFailed        = "BuildFailed"
	ReasonValidationFailed   = "ValidationFailed"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonPruneFailed        = "PruneFailed"
	ReasonVerificationFailed = "VerificationFailed"
	ReasonTestFailed         = "TestFailed"
	ReasonSuspended          = "Suspended"
	// ReasonNotPermitted: the revision writes where a repository of its
	// namespace may not (outside its namespace, or cluster-scoped, without
	// a ServiceAccount or under --no-cross-namespace-refs); nothing is
	// applied.
	ReasonNotPermitted = "NotPermitted"
	// ReasonForbidden: the API server refused a write (or a prune) of the
	// revision to the ServiceAccount the repository runs as, in the
	// dry-run before anything is written; nothing is applied.
	ReasonForbidden = "Forbidden"
	// ReasonConflict: an object of the revision would take over fields,
	// or an existing object, that another field manager holds, and
	// spec.force is not set; nothing is applied.
	ReasonConflict = "Conflict"
	// ReasonLimitExceeded: the revision's checkout holds more bytes or
	// files than charter's gitsync limits allow; nothing is applied.
	ReasonLimitExceeded = "LimitExceeded"
)

// Defaults applied by the reconciler when a field is absent (never written
// into spec).
const (
	DefaultInterval = 5 * time.Minute
	DefaultTimeout  = 60 * time.Second
	// MinTimeout is the shortest spec.timeout (the CRD's validation rule
	// says 1s too).
	MinTimeout = time.Second
)

// ReconcileRequestAnnotation, set to a new value (a timestamp, by
// convention), asks for an immediate sync, even of a revision known to be
// broken; the value handled last is echoed in status.lastHandledReconcileAt.
// The push receiver sets it.
const ReconcileRequestAnnotation = "reconcile.charter.dev/requestedAt"

// LegacyReconcileRequestAnnotation is an earlier spelling of
// ReconcileRequestAnnotation, still honoured when the new one is absent.
//
// Deprecated: use ReconcileRequestAnnotation.
const LegacyReconcileRequestAnnotation = "charter.dev/reconcile-requested-at"

// ReceiverTokenKey is the key of a receiver Secret that holds the shared
// secret of the push webhook.
const ReceiverTokenKey = "token"

// PolicyRepository is a Git repository whose policies charter keeps applied
// to the cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=policyrepositories,scope=Namespaced,shortName=prepo,categories=charter
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=".spec.url"
// +kubebuilder:printcolumn:name="REVISION",type=string,JSONPath=".status.lastAppliedRevision"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="STATUS",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="CONVERTIBLE",type=integer,JSONPath=".status.conversion.convertible",priority=1
// +kubebuilder:printcolumn:name="POLICIES",type=integer,JSONPath=".status.conversion.total",priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type PolicyRepository struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the repository and how to sync it.
	Spec PolicyRepositorySpec `json:"spec"`

	// Status is what charter observed.
	// +optional
	Status PolicyRepositoryStatus `json:"status,omitzero"`
}

// PolicyRepositorySpec declares a Git repository, or an OCI repository of
// artifacts in Flux's format, and how to sync it.
//
// +kubebuilder:validation:XValidation:rule="self.url.startsWith('oci://') || !has(self.ref) || !has(self.ref.digest)",message="spec.ref.digest is for oci:// repositories; a Git repository takes branch, tag, semver or commit"
// +kubebuilder:validation:XValidation:rule="!self.url.startsWith('oci://') || !has(self.ref) || (!has(self.ref.branch) && !has(self.ref.commit))",message="spec.ref: an oci:// repository takes tag, semver or digest, not branch or commit"
// +kubebuilder:validation:XValidation:rule="!has(self.insecure) || !self.insecure || self.url.startsWith('oci://')",message="spec.insecure is for oci:// repositories only"
type PolicyRepositorySpec struct {
	// URL of the repository: https://, ssh://, git@host:path or file://
	// for Git; oci://<registry>/<repository> for OCI artifacts in Flux's
	// format (flux push artifact, charter push).
	// +kubebuilder:validation:Pattern=`^(https?|ssh|file|oci)://.*$|^[^@/]+@[^:]+:.*$`
	URL string `json:"url"`

	// Ref is the revision to sync; for Git the default branch when absent,
	// for OCI the tag "latest".
	// +optional
	Ref *GitRef `json:"ref,omitempty"`

	// Insecure lets an oci:// repository be read over plain HTTP. Only a
	// loopback registry (localhost, 127.0.0.0/8, ::1) may be: anywhere
	// else the artifact and the credentials would cross the network in
	// clear, and the sync is refused.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// Path is the folder in the repository that kustomize builds; the
	// repository root when empty.
	// +optional
	Path string `json:"path,omitempty"`

	// Interval between syncs; 5m when absent.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// RetryInterval between attempts after a failure, and between polls of
	// the remote while the last revision is stalled (a broken commit is
	// not tried again, but a newer one applies at once); Interval when
	// absent.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	RetryInterval *metav1.Duration `json:"retryInterval,omitempty"`

	// Timeout of one fetch, build and apply; 60s when absent. At least
	// 1s: a shorter one could only fail every sync.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="must be at least 1s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// SecretRef names a Secret in the same namespace with credentials:
	// for HTTPS, username and password or bearerToken, and ca.crt for a
	// private CA; for SSH, identity (a private key) and known_hosts, which
	// is required: host keys are always checked; for OCI, a docker config
	// (.dockerconfigjson, as kubectl create secret docker-registry writes
	// it). Without it an oci:// repository uses the imagePullSecrets of
	// the ServiceAccount it runs as, else anonymous access.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`

	// Verify requires the commit, or the OCI artifact, to carry a valid
	// signature.
	// +optional
	Verify *GitVerification `json:"verify,omitempty"`

	// ServiceAccountName names a ServiceAccount of this namespace that
	// charter impersonates to apply and prune the revision, as Flux's
	// kustomize-controller does: Kubernetes RBAC then decides what the
	// repository may install. When empty, serve's
	// --default-service-account applies to a repository outside charter's
	// namespace; without either, such a repository may write only
	// namespaced objects in its own namespace, and a repository in
	// charter's namespace writes with charter's own identity.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Prune deletes objects that left the repository; true when absent.
	// +optional
	Prune *bool `json:"prune,omitempty"`

	// Force lets the repository take over what another field manager
	// holds, as Flux's Kustomization spec.force: fields another manager
	// (a person, the platform, another repository) applied with other
	// values, and objects that exist but are not in the repository's
	// inventory. Without it, such an object stalls the revision with
	// reason Conflict, naming the object, its fields and the other
	// manager, and nothing of the revision applies. Each repository
	// applies under its own field manager, charter/<namespace>/<name>.
	// +optional
	Force bool `json:"force,omitempty"`

	// Suspend stops syncing; objects already applied stay.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Test runs the revision's own kyverno-test.yaml suites, those under
	// Path, before anything is applied: a revision with a failing row, a
	// suite that cannot run or none at all applies nothing, and Ready says
	// TestFailed naming the failing rows.
	// +optional
	Test bool `json:"test,omitempty"`

	// Receiver, when set, accepts push webhooks for this repository at
	// /hooks/<namespace>/<name> on charter's receiver address, so a push
	// syncs at once instead of at the next interval.
	// +optional
	Receiver *Receiver `json:"receiver,omitempty"`
}

// Receiver configures the push webhook of a PolicyRepository.
type Receiver struct {
	// SecretRef names a Secret in the same namespace whose "token" key is
	// the webhook's shared secret. A request must prove it knows the token
	// in one of these forms: GitHub's X-Hub-Signature-256 (HMAC-SHA256 of
	// the body; GHCR's package events too), GitLab's X-Gitlab-Token (the
	// token itself), a generic X-Signature (HMAC-SHA256 of the body,
	// "sha256=<hex>"), Harbor's Auth Header (Authorization: the token, or
	// "Bearer <token>"), or, for Docker Hub, which signs nothing, the
	// token in the URL (?token=<token>). A registry's push of another
	// repository than an oci:// one's (Harbor's repo_full_name, Docker
	// Hub's repo_name, GHCR's package name) syncs nothing.
	SecretRef corev1.LocalObjectReference `json:"secretRef"`
}

// GetInterval returns Interval, 5m when absent.
func (s *PolicyRepositorySpec) GetInterval() time.Duration {
	if s.Interval == nil || s.Interval.Duration <= 0 {
		return DefaultInterval
	}
	return s.Interval.Duration
}

// GetRetryInterval returns RetryInterval, the interval when absent.
func (s *PolicyRepositorySpec) GetRetryInterval() time.Duration {
	if s.RetryInterval == nil || s.RetryInterval.Duration <= 0 {
		return s.GetInterval()
	}
	return s.RetryInterval.Duration
}

// GetTimeout returns Timeout, 60s when absent.
func (s *PolicyRepositorySpec) GetTimeout() time.Duration {
	if s.Timeout == nil || s.Timeout.Duration <= 0 {
		return DefaultTimeout
	}
	// The API server refuses a shorter one; one stored before it did
	// still gets the minimum.
	return max(s.Timeout.Duration, MinTimeout)
}

// IsPrune reports whether objects that left the repository are deleted.
func (s *PolicyRepositorySpec) IsPrune() bool { return s.Prune == nil || *s.Prune }

// GitRef is the revision to sync. At most one of Commit, SemVer, Tag,
// Branch is used, in that order of precedence; for an oci:// repository
// one of Digest, SemVer, Tag.
type GitRef struct {
	// Branch to follow.
	// +optional
	Branch string `json:"branch,omitempty"`

	// Tag to check out.
	// +optional
	Tag string `json:"tag,omitempty"`

	// SemVer is a semantic version range; the highest matching tag is used.
	// +optional
	SemVer string `json:"semver,omitempty"`

	// Commit is a full commit SHA. With Branch, the commit must be on it.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}([0-9a-f]{24})?$`
	Commit string `json:"commit,omitempty"`

	// Digest pins an OCI artifact ("sha256:<hex>"); it wins over SemVer
	// and Tag.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Digest string `json:"digest,omitempty"`
}

// VerificationMode says which object's signature is verified.
// +kubebuilder:validation:Enum=HEAD
type VerificationMode string

// Verification modes.
const (
	// VerifyHead verifies the signature of the checked-out commit.
	VerifyHead VerificationMode = "HEAD"
)

// VerificationProvider is how signatures are verified.
// +kubebuilder:validation:Enum=pgp;cosign
type VerificationProvider string

// Verification providers.
const (
	// ProviderPGP verifies the OpenPGP signature of a Git commit.
	ProviderPGP VerificationProvider = "pgp"
	// ProviderCosign verifies cosign signatures of an OCI artifact.
	ProviderCosign VerificationProvider = "cosign"
)

// GitVerification requires signed commits, or signed OCI artifacts.
//
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) || (has(self.matchOIDCIdentity) && size(self.matchOIDCIdentity) > 0)",message="spec.verify needs secretRef (keys) or matchOIDCIdentity (keyless cosign)"
type GitVerification struct {
	// Mode is what is verified; HEAD when absent. Git only.
	// +optional
	Mode VerificationMode `json:"mode,omitempty"`

	// Provider verifies the signature: pgp for Git commits, cosign for
	// OCI artifacts; the one of the URL's kind when absent.
	// +optional
	Provider VerificationProvider `json:"provider,omitempty"`

	// SecretRef names a Secret of the same namespace holding the public
	// keys: for pgp, armored OpenPGP keys; for cosign, PEM public keys
	// (cosign.pub), one a value. Optional for cosign with
	// matchOIDCIdentity.
	// +optional
	SecretRef corev1.LocalObjectReference `json:"secretRef,omitzero"`

	// MatchOIDCIdentity accepts keyless cosign signatures (a Fulcio
	// certificate logged in Rekor) whose OIDC issuer and subject match one
	// entry's regular expressions. cosign only.
	// +optional
	MatchOIDCIdentity []OIDCIdentityMatch `json:"matchOIDCIdentity,omitempty"`
}

// OIDCIdentityMatch is an accepted keyless signer, as Flux's
// OCIRepository spec.verify.matchOIDCIdentity.
type OIDCIdentityMatch struct {
	// Issuer is a regular expression the certificate's OIDC issuer must
	// match, e.g. ^https://token\.actions\.githubusercontent\.com$.
	// +kubebuilder:validation:MinLength=1
	Issuer string `json:"issuer"`
	// Subject is a regular expression the certificate's subject (an
	// email or a workflow URL) must match.
	// +kubebuilder:validation:MinLength=1
	Subject string `json:"subject"`
}

// PolicyRepositoryStatus is what charter observed about a PolicyRepository.
type PolicyRepositoryStatus struct {
	// ObservedGeneration is the spec generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, SourceVerified.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastAttemptedRevision is the revision last fetched, as
	// "<ref>@sha1:<commit>" (Git) or "<tag>@sha256:<digest>" (OCI),
	// whether or not it applied.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`

	// LastAppliedRevision is the revision last applied in full.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`

	// Inventory lists the objects applied from LastAppliedRevision, for
	// pruning.
	// +optional
	Inventory *ResourceInventory `json:"inventory,omitempty"`

	// LastHandledReconcileAt is the last value of the reconcile-request
	// annotation that was handled.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`

	// Conversion counts the ClusterPolicies and Policies of
	// LastAppliedRevision that `charter convert` writes cleanly as
	// Kyverno's CEL kinds: the migration debt of ClusterPolicy's
	// deprecation. Absent when the revision holds none.
	// +optional
	Conversion *ConversionStatus `json:"conversion,omitempty"`
}

// ConversionStatus counts a revision's policies that convert to the CEL
// kinds (policies.kyverno.io).
type ConversionStatus struct {
	// Revision is the revision counted.
	Revision string `json:"revision"`

	// Total is the number of ClusterPolicies and Policies.
	Total int32 `json:"total"`

	// Convertible is how many of them convert cleanly.
	Convertible int32 `json:"convertible"`

	// Unconvertible names the first of those that do not (at most
	// MaxUnconvertibleListed), each with the first reason `charter
	// convert` gives.
	// +optional
	Unconvertible []UnconvertiblePolicy `json:"unconvertible,omitempty"`
}

// MaxUnconvertibleListed bounds ConversionStatus.Unconvertible, so a
// repository of hundreds of policies keeps a small status.
const MaxUnconvertibleListed = 10

// UnconvertiblePolicy is a policy that does not convert, and why.
type UnconvertiblePolicy struct {
	// Name is the policy's name, namespace/name for a Policy.
	Name string `json:"name"`

	// Reason is the first problem `charter convert` reports.
	Reason string `json:"reason"`
}

// ResourceInventory lists applied objects.
type ResourceInventory struct {
	// Entries are the objects.
	Entries []ResourceRef `json:"entries"`
}

// ResourceRef identifies one applied object.
type ResourceRef struct {
	// ID is "<namespace>_<name>_<group>_<kind>"; namespace and group are
	// empty for cluster-scoped objects and the core group.
	ID string `json:"id"`

	// Version is the API version the object was applied with.
	Version string `json:"v"`
}

// ObjectID returns the inventory ID of an object.
func ObjectID(namespace, name, group, kind string) string {
	return strings.Join([]string{namespace, name, group, kind}, "_")
}

// ParseObjectID splits an inventory ID into its parts. Names and namespaces
// cannot contain "_", groups and kinds neither, so the split is unambiguous.
func ParseObjectID(id string) (namespace, name, group, kind string, err error) {
	parts := strings.Split(id, "_")
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
		return "", "", "", "", fmt.Errorf("inventory id %q: want <namespace>_<name>_<group>_<kind>", id)
	}
	return parts[0], parts[1], parts[2], parts[3], nil
}

// PolicyRepositoryList is a list of PolicyRepository.
//
// +kubebuilder:object:root=true
type PolicyRepositoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyRepository `json:"items"`
}

// OCIScheme starts the URL of a repository of OCI artifacts.
const OCIScheme = "oci://"

// IsOCI reports whether the repository is an OCI repository of artifacts
// rather than a Git repository.
func (s *PolicyRepositorySpec) IsOCI() bool { return strings.HasPrefix(s.URL, OCIScheme) }
