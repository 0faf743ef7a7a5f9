package gitsync

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// HookPathPrefix is where the receiver listens: /hooks/<namespace>/<name>.
const HookPathPrefix = "/hooks/"

// ReceiverTokenKey is the key of the receiver Secret that holds the
// webhook's shared secret.
const ReceiverTokenKey = gitopsv1alpha1.ReceiverTokenKey

// ReceiverSecretAnnotation is the way a PolicyRepository named its receiver
// Secret before spec.receiver existed; it is honoured when spec.receiver is
// absent.
//
// Deprecated: set spec.receiver.secretRef.
const ReceiverSecretAnnotation = "gitops.charter.dev/receiver-secret"

// receiverSecretName returns the name of repo's receiver Secret, "" when
// it accepts no pushes.
func receiverSecretName(repo *gitopsv1alpha1.PolicyRepository) string {
	if r := repo.Spec.Receiver; r != nil {
		return r.SecretRef.Name
	}
	return repo.GetAnnotations()[ReceiverSecretAnnotation]
}

// Signature headers the receiver understands.
const (
	// GitHub: HMAC-SHA256 of the body, "sha256=<hex>".
	headerGitHubSignature = "X-Hub-Signature-256"
	headerGitHubEvent     = "X-GitHub-Event"
	// GitLab: the token itself.
	headerGitLabToken = "X-Gitlab-Token"
	// Generic: HMAC-SHA256 of the body, "sha256=<hex>".
	headerSignature = "X-Signature"
	// Harbor: the webhook's "Auth Header", sent as Authorization, the
	// token itself or "Bearer <token>".
	headerAuthorization = "Authorization"
	// Docker Hub signs nothing: its webhook URL carries the token as
	// ?token=<token>.
	queryToken = "token"
)

// maxPayload bounds a push payload; GitHub caps them at 25 MB, pushes are
// far smaller and only the signature over them matters here.
const maxPayload = 5 << 20

// Receiver turns a verified push webhook into a sync request: it sets
// RequestedAtAnnotation on the PolicyRepository, which the reconciler
// watches.
type Receiver struct {
	Client client.Client
	// Secrets reads the receiver Secrets; Client when nil.
	Secrets client.Reader
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// NewReceiver returns a receiver using c.
func NewReceiver(c client.Client) *Receiver { return &Receiver{Client: c} }

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, HookPathPrefix), "/")
	if !strings.HasPrefix(req.URL.Path, HookPathPrefix) || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		http.Error(w, "want /hooks/<namespace>/<name>", http.StatusNotFound)
		return
	}
	ctx := req.Context()
	logger := log.FromContext(ctx).WithValues("policyRepository", parts[0]+"/"+parts[1])
	body, err := io.ReadAll(io.LimitReader(req.Body, maxPayload+1))
	if err != nil || len(body) > maxPayload {
		http.Error(w, "payload unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}

	var repo gitopsv1alpha1.PolicyRepository
	key := client.ObjectKey{Namespace: parts[0], Name: parts[1]}
	// Unknown repositories and repositories without a receiver secret look
	// the same from outside.
	if err := rc.Client.Get(ctx, key, &repo); err != nil {
		http.NotFound(w, req)
		return
	}
	secretName := receiverSecretName(&repo)
	if secretName == "" {
		http.NotFound(w, req)
		return
	}
	var secrets client.Reader = rc.Client
	if rc.Secrets != nil {
		secrets = rc.Secrets
	}
	var secret corev1.Secret
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: repo.Namespace, Name: secretName}, &secret); err != nil {
		logger.Error(err, "receiver secret unreadable", "secret", secretName)
		http.Error(w, "receiver not configured", http.StatusServiceUnavailable)
		return
	}
	token := secret.Data[ReceiverTokenKey]
	if len(token) == 0 || !verified(req, body, token) {
		http.Error(w, "signature missing or invalid", http.StatusUnauthorized)
		return
	}
	if req.Header.Get(headerGitHubEvent) == "ping" {
		w.WriteHeader(http.StatusOK)
		return
	}
	// A registry's push of another repository (one webhook often serves
	// a whole project or organisation) syncs nothing.
	if other := otherArtifact(&repo, body); other != "" {
		logger.V(1).Info("push of another repository ignored", "pushed", other)
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "ignored: the push is of "+other+", not of "+repo.Spec.URL+"\n")
		return
	}

	now := time.Now
	if rc.Now != nil {
		now = rc.Now
	}
	patch := client.MergeFrom(repo.DeepCopy())
	ann := repo.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[RequestedAtAnnotation] = now().UTC().Format(time.RFC3339Nano)
	repo.SetAnnotations(ann)
	if err := rc.Client.Patch(ctx, &repo, patch); err != nil {
		logger.Error(err, "requesting a sync")
		http.Error(w, "could not request a sync", http.StatusInternalServerError)
		return
	}
	logger.Info("push received; sync requested")
	w.WriteHeader(http.StatusAccepted)
}

// verified checks the request's signature against token, in the form the
// request carries.
func verified(req *http.Request, body, token []byte) bool {
	h := req.Header
	switch {
	case h.Get(headerGitHubSignature) != "":
		return validHMAC(h.Get(headerGitHubSignature), body, token)
	case h.Get(headerGitLabToken) != "":
		return subtle.ConstantTimeCompare([]byte(h.Get(headerGitLabToken)), token) == 1
	case h.Get(headerSignature) != "":
		return validHMAC(h.Get(headerSignature), body, token)
	case h.Get(headerAuthorization) != "":
		got := strings.TrimPrefix(h.Get(headerAuthorization), "Bearer ")
		return subtle.ConstantTimeCompare([]byte(got), token) == 1
	case req.URL.Query().Get(queryToken) != "":
		return subtle.ConstantTimeCompare([]byte(req.URL.Query().Get(queryToken)), token) == 1
	}
	return false
}

// registryPush is what charter reads of a registry's push webhook: the
// repository pushed, as Harbor (event_data.repository.repo_full_name),
// Docker Hub (repository.repo_name) and GitHub's package events for GHCR
// (package.name, the last part of the path) name it.
type registryPush struct {
	EventData struct {
		Repository struct {
			RepoFullName string `json:"repo_full_name"`
		} `json:"repository"`
	} `json:"event_data"`
	Repository struct {
		RepoName string `json:"repo_name"`
	} `json:"repository"`
	Package struct {
		Name string `json:"name"`
	} `json:"package"`
}

// otherArtifact returns the repository a registry's push names when repo
// is an oci:// repository and the push is of another one; "" when the
// push is of repo, names none, or repo is a Git repository.
func otherArtifact(repo *gitopsv1alpha1.PolicyRepository, body []byte) string {
	if !repo.Spec.IsOCI() {
		return ""
	}
	var p registryPush
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	pushed := p.EventData.Repository.RepoFullName
	if pushed == "" {
		pushed = p.Repository.RepoName
	}
	if pushed == "" {
		pushed = p.Package.Name
	}
	if pushed == "" {
		return ""
	}
	// The URL's path, without the registry host: oci://ghcr.io/org/policies
	// is org/policies.
	_, path, _ := strings.Cut(strings.TrimPrefix(repo.Spec.URL, gitopsv1alpha1.OCIScheme), "/")
	if strings.EqualFold(path, pushed) || strings.HasSuffix(strings.ToLower(path), "/"+strings.ToLower(pushed)) {
		return ""
	}
	return pushed
}

func validHMAC(header string, body, token []byte) bool {
	sig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, token)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}
