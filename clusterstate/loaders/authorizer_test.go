package loaders

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// sarServer answers SubjectAccessReviews by user: alice is allowed, bob
// is not, anyone else gets 403 (charter may not create reviews). It
// counts the reviews it receives by user.
type sarServer struct {
	mu   sync.Mutex
	seen map[string]int
}

func (s *sarServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var sar authorizationv1.SubjectAccessReview
	if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.seen[sar.Spec.User]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch sar.Spec.User {
	case "alice", "bob":
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: sar.Spec.User == "alice", Reason: "decided for " + sar.Spec.User}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&sar)
	default:
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
			`"message":"subjectaccessreviews.authorization.k8s.io is forbidden"}`))
	}
}

func (s *sarServer) count(user string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[user]
}

// TestAuthorizerAsksSubjectAccessReviews: allowed and denied answers are
// cached apart (a denial expires sooner here), a review that fails is a
// deny with its error, never cached and never an allow, and reviews are
// counted by status code.
func TestAuthorizerAsksSubjectAccessReviews(t *testing.T) {
	srv := &sarServer{seen: map[string]int{}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthorizer(kube.AuthorizationV1(), AuthorizerOptions{
		AllowTTL: time.Hour, DenyTTL: time.Millisecond,
		Backoff: wait.Backoff{Duration: time.Millisecond, Steps: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := authorizerMetrics()
	forbiddenBefore := testutil.ToFloat64(m.(sarMetrics).total.WithLabelValues("403"))
	check := func(name string) (authorizer.Decision, string, error) {
		return a.Authorize(context.Background(), &authorizer.AttributesRecord{
			User: &user.DefaultInfo{Name: name, Groups: []string{"system:authenticated"}}, Verb: "delete",
			ResourceRequest: true, Resource: "pods", Namespace: "shop",
		})
	}

	for range 2 {
		if d, reason, err := check("alice"); d != authorizer.DecisionAllow || err != nil || reason != "decided for alice" {
			t.Fatalf("alice: %v %q %v, want allow", d, reason, err)
		}
	}
	if n := srv.count("alice"); n != 1 {
		t.Errorf("alice: %d reviews, want 1 (the allow is cached)", n)
	}

	if d, _, err := check("bob"); d == authorizer.DecisionAllow || err != nil {
		t.Fatalf("bob: %v %v, want no allow and no error", d, err)
	}
	time.Sleep(20 * time.Millisecond) // past DenyTTL, within AllowTTL
	if d, _, _ := check("bob"); d == authorizer.DecisionAllow {
		t.Fatalf("bob allowed on the second review")
	}
	if n := srv.count("bob"); n != 2 {
		t.Errorf("bob: %d reviews, want 2 (the denial expired)", n)
	}
	if _, _, _ = check("alice"); srv.count("alice") != 1 {
		t.Errorf("alice asked again within AllowTTL")
	}

	for range 2 {
		d, _, err := check("carol")
		if d != authorizer.DecisionDeny || err == nil {
			t.Fatalf("carol (review forbidden): %v %v, want deny with an error", d, err)
		}
	}
	if n := srv.count("carol"); n != 2 {
		t.Errorf("carol: %d reviews, want 2 (a failed review is not cached)", n)
	}
	if got := testutil.ToFloat64(m.(sarMetrics).total.WithLabelValues("403")) - forbiddenBefore; got != 2 {
		t.Errorf("charter_cel_authorizer_requests_total{code=403} grew by %v, want 2", got)
	}
}
