package gitsync

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// TestTimeoutBelowTheMinimumIsRefused: the API server refuses a
// PolicyRepository whose spec.timeout is below 1s, on create and on
// update, naming the field, as it refuses a malformed one; 1s is taken.
func TestTimeoutBelowTheMinimumIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	repo := func(name string, timeout time.Duration) *gitopsv1alpha1.PolicyRepository {
		return &gitopsv1alpha1.PolicyRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{URL: "https://git.example/policies.git", Suspend: true,
				Timeout: &metav1.Duration{Duration: timeout}}}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.timeout") || !strings.Contains(err.Error(), "must be at least 1s") {
			t.Errorf("%s: got %v, want Invalid naming spec.timeout and the minimum", what, err)
		}
	}
	for _, d := range []time.Duration{time.Millisecond, 999 * time.Millisecond} {
		refused("create with timeout "+d.String(), testClient.Create(ctx, repo("short", d)))
	}
	ok := repo("one-second", time.Second)
	if err := testClient.Create(ctx, ok); err != nil {
		t.Fatalf("create with timeout 1s: %v", err)
	}
	// A merge patch carries no resourceVersion: the controller running in
	// this suite may write the object's finalizer or status meanwhile, and an
	// Update would then fail with a conflict instead of the validation error.
	before := ok.DeepCopy()
	ok.Spec.Timeout = &metav1.Duration{Duration: time.Millisecond}
	refused("update to timeout 1ms", testClient.Patch(ctx, ok, client.MergeFrom(before)))
}
