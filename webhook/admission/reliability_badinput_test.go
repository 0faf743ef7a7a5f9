package admission

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/internal/reliability"
	"github.com/charter-dev/charter/webhook/config"
	"github.com/charter-dev/charter/webhook/server"
)

// TestReliabilityBadInputAdmission (issue #31, bad input corpus) feeds the
// admission controller, on a real API server, every bad input it can be
// given: each invalid policy of internal/reliability/testdata/badinput
// (every kind) created through the API server, an installed policy
// updated to an invalid one, bad charter.dev/enforcement values on a
// Namespace, and malformed AdmissionReviews POSTed straight to every
// admission path of the server. Each must be refused with an error naming
// what is wrong and where, and the cluster's state (every object of every
// resource) must be what it was before.
func TestReliabilityBadInputAdmission(t *testing.T) {
	f := startAdmission(t, withNamespaces("team", "shop", "probe"))
	ctx, cl := f.ctx, f.client
	staged := policyFile(t, "staged-require-name-label.yaml")
	eventually(t, "staged policy created", 30*time.Second, func() error { return cl.Create(ctx, staged) })

	// Both gates answer before the state is taken: a bad input admitted
	// while a webhook was not yet in place would be a change of the test's
	// making, not charter's.
	policies := reliability.BadPolicies(t)
	probe := &unstructured.Unstructured{Object: policies[0].Policy}
	eventually(t, "policy validation answers", 30*time.Second, func() error {
		err := cl.Create(ctx, probe.DeepCopy())
		if err == nil {
			_ = cl.Delete(ctx, probe.DeepCopy())
			return errNotYet("a bad policy was admitted")
		}
		if !strings.Contains(err.Error(), "denied the request") {
			return err
		}
		return nil
	})
	eventually(t, "promotion gate answers", 30*time.Second, func() error {
		err := setEnforcementLabel(f, "probe", "Enforce")
		if err == nil {
			_ = setEnforcementLabel(f, "probe", "")
			return errNotYet("label value Enforce was admitted")
		}
		if !strings.Contains(err.Error(), "denied the request") {
			return err
		}
		return nil
	})
	before, err := reliability.Snapshot(ctx, f.cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}

	var tally reliability.Tally
	// Strict field validation, as kubectl asks for by default: with the
	// API server's default (Warn), an unknown field is dropped with a
	// warning before any webhook sees the policy.
	strict := client.WithFieldValidation(cl, metav1.FieldValidationStrict)
	for _, p := range policies {
		err := strict.Create(ctx, &unstructured.Unstructured{Object: p.Policy})
		// The kind and the field: a refusal by the API server's strict
		// decoding names no object, charter's always does.
		tally.Refused("create "+p.File, err, p.Kind(), p.Field)
	}

	// An update of an installed policy to an invalid one keeps the
	// installed one.
	var installed unstructured.Unstructured
	installed.SetGroupVersionKind(kyvernov1.GroupVersion.WithKind("ClusterPolicy"))
	if err := cl.Get(ctx, client.ObjectKeyFromObject(staged), &installed); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(installed.Object, []any{}, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	tally.Refused("update ClusterPolicy to no rules", cl.Update(ctx, &installed), "ClusterPolicy", staged.Name, "spec.rules")

	for _, tc := range []struct {
		value string
		want  []string
	}{
		// Values charter refuses: a typo must never leave a namespace
		// silently in Audit.
		{"Enforce", []string{charter.EnforcementLabel, `"Enforce"`, `want "audit" or "enforce"`}},
		{"ENFORCE", []string{charter.EnforcementLabel, `"ENFORCE"`}},
		{"enforced", []string{charter.EnforcementLabel, `"enforced"`}},
		{"true", []string{charter.EnforcementLabel, `"true"`}},
		{"strict", []string{charter.EnforcementLabel, `"strict"`}},
		// Values no label may take: the API server refuses them first.
		{"audit,enforce", []string{"metadata.labels", `"audit,enforce"`}},
		{" enforce", []string{"metadata.labels", `" enforce"`}},
	} {
		tally.Refused("label shop "+charter.EnforcementLabel+"="+tc.value, setEnforcementLabel(f, "shop", tc.value), tc.want...)
	}

	post := reviewPoster(t, f)
	for _, in := range reliability.Inputs(t, "reviews") {
		for _, path := range reviewPaths {
			tally.Refused(path+" "+in.File, post(http.MethodPost, path, "application/json", in.Data), in.Want...)
		}
	}
	for _, tc := range []struct {
		name, method, contentType string
		body                      []byte
		want                      []string
	}{
		{"GET", http.MethodGet, "application/json", nil, []string{"method GET not allowed"}},
		{"YAML content type", http.MethodPost, "application/yaml", []byte("{}"), []string{`content type "application/yaml" not supported`}},
		{"no content type", http.MethodPost, "", []byte("{}"), []string{"missing content type"}},
		{"8 MiB body", http.MethodPost, "application/json", hugeReview(8 << 20), []string{"request body larger than"}},
		{"nesting 100,000 deep", http.MethodPost, "application/json", deepReview(100000), []string{"malformed AdmissionReview"}},
	} {
		for _, path := range reviewPaths {
			tally.Refused(path+" "+tc.name, post(tc.method, path, tc.contentType, tc.body), tc.want...)
		}
	}

	after, err := reliability.Snapshot(ctx, f.cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	tally.Changed(before.Diff(after)...)
	tally.Report(t, "bad input: admission (policies of every kind, enforcement labels, AdmissionReviews)")
}

// reviewPaths are the admission paths a malformed AdmissionReview is sent
// to: each decodes its review on its own.
var reviewPaths = []string{
	server.PathValidateFail, server.PathValidateIgnore, server.PathMutateFail, server.PathMutateIgnore,
	server.PathPolicyValidate, server.PathPromotion,
}

// setEnforcementLabel labels Namespace ns charter.dev/enforcement=value
// through the API server; "" removes the label.
func setEnforcementLabel(f *fixture, ns, value string) error {
	var n corev1.Namespace
	if err := f.client.Get(f.ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		return err
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[charter.EnforcementLabel] = value
	if value == "" {
		delete(n.Labels, charter.EnforcementLabel)
	}
	return f.client.Update(f.ctx, &n)
}

// reviewPoster returns a function sending a body to a path of the
// fixture's admission server over HTTPS, trusting the CA its webhook
// configurations carry, as the API server does. Any answer but a 4xx
// whose body names the fault is returned as an error with that body; an
// AdmissionReview answered 200 is nil, "accepted".
func reviewPoster(t *testing.T, f *fixture) func(method, path, contentType string, body []byte) error {
	t.Helper()
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := f.client.Get(f.ctx, client.ObjectKey{Name: config.PolicyValidatingName}, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Webhooks) == 0 {
		t.Fatalf("%s has no webhooks", config.PolicyValidatingName)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(v.Webhooks[0].ClientConfig.CABundle) {
		t.Fatalf("%s: no CA certificate in caBundle", config.PolicyValidatingName)
	}
	httpClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(httpClient.CloseIdleConnections)
	return func(method, path, contentType string, body []byte) error {
		req, err := http.NewRequestWithContext(f.ctx, method, f.options.URL+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		text, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return fmt.Errorf("HTTP %d: %s", resp.StatusCode, text)
		}
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		return fmt.Errorf("HTTP %d, not a 4xx: %s", resp.StatusCode, text)
	}
}

// hugeReview is a well-formed AdmissionReview of about size bytes: a Pod
// with one label value that long.
func hugeReview(size int) []byte {
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE",` +
		`"object":{"metadata":{"name":"p","labels":{"a":"` + strings.Repeat("x", size) + `"}}}}}`)
}

// deepReview is an AdmissionReview whose object nests depth arrays.
func deepReview(depth int) []byte {
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE",` +
		`"object":{"spec":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}}`)
}
