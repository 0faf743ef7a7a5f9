package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/reconciler/gitsync/source/oci"
)

// ociRepository is the registry repository the OCI rounds push to.
const ociRepository = "bench/policies"

// blobCountingRegistry is an OCI registry on loopback that counts the
// bytes of the blobs (config and layers) it serves, so that an unchanged
// poll can be shown to pull none.
type blobCountingRegistry struct {
	srv  *httptest.Server
	host string
	// blobBytes is what GET /v2/<name>/blobs/<digest> has served.
	blobBytes atomic.Int64
}

func startRegistry() (*blobCountingRegistry, error) {
	r := &blobCountingRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			w = &countingWriter{ResponseWriter: w, n: &r.blobBytes}
		}
		reg.ServeHTTP(w, req)
	}))
	u, err := url.Parse(r.srv.URL)
	if err != nil {
		r.srv.Close()
		return nil, err
	}
	r.host = u.Host
	return r, nil
}

func (r *blobCountingRegistry) stop() { r.srv.Close() }

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// ociResult is the OCI path's measurement.
type ociResult struct {
	rounds []pushRound
	// unchangedPolls synced an unchanged tag; blobBytes is what they
	// pulled of configs and layers together.
	unchangedPolls int
	blobBytes      int64
	// pushBlobBytes is what the rounds' syncs pulled, which shows the
	// count works: each new artifact is pulled once.
	pushBlobBytes int64
}

// ociPushToEnforced is pushToEnforced for an OCI PolicyRepository: each
// round pushes an artifact in Flux's format with one more Enforce policy
// and calls the receiver as Docker Hub's webhook does; the clock starts
// before the push. Then it asks for polls of the unchanged tag and counts
// the blob bytes they pull.
func (b *bench) ociPushToEnforced(ctx context.Context, proc *charterProcess, reg *blobCountingRegistry, runs, polls int) (ociResult, error) {
	var res ociResult
	remote, err := oci.NewRemote("oci://"+reg.host+"/"+ociRepository, oci.WithInsecure(true))
	if err != nil {
		return res, err
	}
	dir := filepath.Join(b.work, "oci")
	files := map[string]string{"baseline.yaml": labelPolicy("bench-oci-baseline", "bench-oci-baseline", "Audit")}
	// artifact builds the folder's artifact and returns it with the
	// revision a PolicyRepository reports for it.
	artifact := func() (v1.Image, string, error) {
		for name, content := range files {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, "", err
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				return nil, "", err
			}
		}
		data, err := oci.Archive(dir)
		if err != nil {
			return nil, "", err
		}
		img, err := oci.Image(data, map[string]string{oci.AnnotationCreated: time.Now().UTC().Format(time.RFC3339Nano)})
		if err != nil {
			return nil, "", err
		}
		d, err := img.Digest()
		if err != nil {
			return nil, "", err
		}
		return img, oci.DefaultTag + "@" + d.String(), nil
	}
	img, rev, err := artifact()
	if err != nil {
		return res, err
	}
	if _, err := remote.Push(ctx, oci.DefaultTag, img); err != nil {
		return res, err
	}
	pr := &gitopsv1alpha1.PolicyRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: charterNamespace, Name: "oci"},
		Spec: gitopsv1alpha1.PolicyRepositorySpec{
			URL:      "oci://" + reg.host + "/" + ociRepository,
			Ref:      &gitopsv1alpha1.GitRef{Tag: oci.DefaultTag},
			Insecure: true,
			Interval: &metav1.Duration{Duration: time.Hour},
			Receiver: &gitopsv1alpha1.Receiver{SecretRef: corev1.LocalObjectReference{Name: receiverSecret}},
		},
	}
	if err := b.client.Create(ctx, pr); err != nil {
		return res, err
	}
	if _, err := b.waitReady(ctx, pr, rev, 2*time.Minute); err != nil {
		return res, err
	}

	pushed := reg.blobBytes.Load()
	for i := range runs {
		name := fmt.Sprintf("bench-oci-enforce-%d", i)
		files[name+".yaml"] = labelPolicy(name, name, "Enforce")
		img, rev, err := artifact()
		if err != nil {
			return res, err
		}
		r, err := b.pushRound(ctx, proc, pr, rev, name, func(ctx context.Context) error {
			if _, err := remote.Push(ctx, oci.DefaultTag, img); err != nil {
				return err
			}
			return callRegistryHook(ctx, proc.receiver, pr)
		})
		if err != nil {
			return res, fmt.Errorf("round %d: %w", i+1, err)
		}
		fmt.Printf("  oci push %d: repository Ready after %s, policy Ready after %s, enforced after %s\n", i+1, ms(r.ready), ms(r.policyReady), ms(r.enforced))
		res.rounds = append(res.rounds, r)
	}

	before := reg.blobBytes.Load()
	res.pushBlobBytes = before - pushed
	for i := range polls {
		if err := b.requestSync(ctx, pr, fmt.Sprintf("unchanged-%d", i)); err != nil {
			return res, fmt.Errorf("unchanged poll %d: %w", i+1, err)
		}
	}
	res.unchangedPolls = polls
	res.blobBytes = reg.blobBytes.Load() - before
	return res, nil
}

// requestSync sets the reconcile-request annotation to token, as flux
// reconcile does, and waits until charter has handled it.
func (b *bench) requestSync(ctx context.Context, pr *gitopsv1alpha1.PolicyRepository, token string) error {
	got := &gitopsv1alpha1.PolicyRepository{}
	if err := b.client.Get(ctx, client.ObjectKeyFromObject(pr), got); err != nil {
		return err
	}
	patch := client.MergeFrom(got.DeepCopy())
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	got.Annotations[gitopsv1alpha1.ReconcileRequestAnnotation] = token
	if err := b.client.Patch(ctx, got, patch); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	for {
		if err := b.client.Get(ctx, client.ObjectKeyFromObject(pr), got); err == nil && got.Status.LastHandledReconcileAt == token {
			if s := conditionOf(got, gitopsv1alpha1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
				return fmt.Errorf("PolicyRepository %s stalled: %s", pr.Name, s.Message)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("PolicyRepository %s did not handle reconcile request %q", pr.Name, token)
		case <-time.After(pollEvery):
		}
	}
}

// callRegistryHook posts what Docker Hub's webhook sends after a push,
// the token in the URL as Docker Hub's webhooks carry it.
func callRegistryHook(ctx context.Context, base string, pr *gitopsv1alpha1.PolicyRepository) error {
	body := []byte(`{"push_data":{"tag":"` + oci.DefaultTag + `"},"repository":{"repo_name":"` + ociRepository + `"}}`)
	u := base + "/hooks/" + pr.Namespace + "/" + pr.Name + "?token=" + url.QueryEscape(string(receiverToken))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("receiver: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
