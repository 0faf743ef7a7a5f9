package server

import (
	"net/http"
	"os"
	"testing"
)

// FuzzHandlers feeds arbitrary bodies to every admission path: the answer
// is a response or a 4xx, never a panic or a 5xx.
func FuzzHandlers(f *testing.F) {
	seed, err := os.ReadFile("testdata/review-pod.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(compliant().review())
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"ClusterPolicy"},"operation":"CREATE","object":{"spec":{"rules":[{"name":"r"}]}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"DELETE","oldObject":null}}`))
	f.Add([]byte(`null`))
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(f)}, Filters: DefaultResourceFilters("charter")})
	paths := []string{PathValidate, PathValidateFail, PathMutateFail, PathPolicyValidate}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range paths {
			w := post(h, path, body)
			if w.Code >= 500 || (w.Code != http.StatusOK && w.Code < 400) {
				t.Fatalf("%s: HTTP %d: %s", path, w.Code, w.Body.String())
			}
		}
	})
}
