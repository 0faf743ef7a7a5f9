package imageverify_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sigstore/cosign/v2/pkg/cosign"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/egress"
	"github.com/charter-dev/charter/internal/imagetest"
)

// guard builds an egress guard with the default blocklist, letting
// through the allowed addresses.
func guard(t *testing.T, allowed ...string) *egress.Guard {
	t.Helper()
	g, err := egress.New(egress.WithAllowedAddresses(allowed))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestTUFTrustFetchesThroughTheEgressGuard: the public trust material
// (Fulcio roots, Rekor and CT log keys) comes from a TUF repository,
// verified from its root, over the egress guard: a mirror on a blocked
// address is never connected to, nor is one an allowed mirror redirects
// to; once let through, its trusted root is read.
func TestTUFTrustFetchesThroughTheEgressGuard(t *testing.T) {
	ca, log := imagetest.NewCA(t, "tuf fulcio"), imagetest.NewRekor(t)
	repo := imagetest.NewTUFRepository(t, ca, log)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, repo.URL+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(front.Close)
	frontHost := strings.TrimPrefix(front.URL, "http://")

	for _, c := range []struct {
		name, mirror string
		guard        *egress.Guard
		wantErr      string
	}{
		{name: "a mirror on loopback under the default guard", mirror: repo.URL, guard: guard(t), wantErr: "address 127.0.0.1 is blocked"},
		{name: "the cloud metadata address as mirror", mirror: "http://169.254.169.254", guard: guard(t), wantErr: "address 169.254.169.254 is blocked"},
		{name: "an allowed mirror redirecting to a blocked one", mirror: front.URL, guard: guard(t, frontHost), wantErr: "address 127.0.0.1 is blocked"},
		{name: "the mirror let through", mirror: repo.URL, guard: guard(t, repo.Host)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := repo.Requests()
			trust := imageverify.NewTUFTrust(imageverify.TUFOptions{Mirror: c.mirror, Root: repo.Root, Egress: c.guard})
			certs, err := trust.FulcioRoots(context.Background())
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("FulcioRoots: %d certificates, error %v; want an error containing %q", len(certs), err, c.wantErr)
				}
				if n := repo.Requests() - before; n != 0 {
					t.Fatalf("the blocked repository was sent %d requests", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(certs) != 1 || certs[0].Subject.CommonName != "tuf fulcio" {
				t.Fatalf("FulcioRoots %v, want the repository's CA", certs)
			}
			for name, keys := range map[string]func(context.Context) (int, error){
				"Rekor": func(ctx context.Context) (int, error) { k, err := trust.RekorPubs(ctx); return lenKeys(k, err) },
				"CT":    func(ctx context.Context) (int, error) { k, err := trust.CTLogPubs(ctx); return lenKeys(k, err) },
			} {
				if n, err := keys(context.Background()); err != nil || n != 1 {
					t.Errorf("%s keys: %d, %v; want the repository's one", name, n, err)
				}
			}
		})
	}
}

// TestKeylessVerificationFetchesTrustThroughEgress: a keyless attestor
// without roots makes the verifier fetch the public Fulcio roots; with
// the registry let through but not the TUF mirror, the fetch is refused
// (the rule errs and blocks, the mirror sees no request); with both let
// through, the image verifies against the repository's CA.
func TestKeylessVerificationFetchesTrustThroughEgress(t *testing.T) {
	f := newFixture(t)
	repo := imagetest.NewTUFRepository(t, f.ca, f.rekor)
	entry := fmt.Sprintf("- imageReferences: [%q]\n  attestors:\n  - entries:\n    - keyless:\n        subject: \"*@example.com\"\n        issuer: \"https://token.actions.*\"\n        rekor: {url: \"http://127.0.0.1:1\", ignoreTlog: true}\n        ctlog: {ignoreSCT: true}\n", f.reg.Host+"/app:*")
	verifier := func(g *egress.Guard) *imageverify.Verifier {
		return imageverify.New(imageverify.Options{Egress: g,
			PublicTrust: imageverify.NewTUFTrust(imageverify.TUFOptions{Mirror: repo.URL, Root: repo.Root, Egress: g})})
	}

	m, _ := run(t, verifier(f.reg.Egress()), policy(t, entry), pod(f.keyless.Ref))
	if rr := onlyRule(t, m.Policies); rr.Status != engine.StatusError || !strings.Contains(rr.Message, "address 127.0.0.1 is blocked") || !m.Blocked() {
		t.Fatalf("TUF mirror not let through: %s %q, want a blocking error naming the address", rr.Status, rr.Message)
	}
	if n := repo.Requests(); n != 0 {
		t.Fatalf("the blocked TUF mirror was sent %d requests", n)
	}
	m, _ = run(t, verifier(guard(t, f.reg.Host, repo.Host)), policy(t, entry), pod(f.keyless.Ref))
	if rr := onlyRule(t, m.Policies); rr.Status != engine.StatusPass {
		t.Fatalf("TUF mirror let through: %s %q, want pass", rr.Status, rr.Message)
	}
}
func lenKeys(k *cosign.TrustedTransparencyLogPubKeys, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return len(k.Keys), nil
}
