package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// nodeAddrs stands in for net.InterfaceAddrs: the node is 10.1.2.3 and
// 2001:db8::7.
func nodeAddrs() ([]net.Addr, error) {
	return []net.Addr{
		&net.IPNet{IP: net.ParseIP("10.1.2.3"), Mask: net.CIDRMask(24, 32)},
		&net.IPNet{IP: net.ParseIP("2001:db8::7"), Mask: net.CIDRMask(64, 128)},
	}, nil
}

func mustGuard(t *testing.T, opts ...Option) *Guard {
	t.Helper()
	g, err := New(append([]Option{WithInterfaceAddrs(nodeAddrs)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestDefaultBlocklistAddressClasses: every class the default refuses, in
// every spelling an attacker would try, and the addresses it lets by.
func TestDefaultBlocklistAddressClasses(t *testing.T) {
	g := mustGuard(t)
	tests := []struct {
		addr string
		want string // "" passes; else a part of the refusal
	}{
		{"127.0.0.1:80", "127.0.0.0/8: loopback"},
		{"127.1.2.3:8080", "127.0.0.0/8: loopback"},
		{"[::1]:80", "::1/128: loopback"},
		{"[::ffff:127.0.0.1]:80", "127.0.0.0/8: loopback"},
		{"[::ffff:7f00:1]:443", "127.0.0.0/8: loopback"},
		{"[64:ff9b::7f00:1]:80", "127.0.0.0/8: loopback"},
		{"[::127.0.0.1]:80", "127.0.0.0/8: loopback"},
		{"[2002:7f00:1::]:80", "127.0.0.0/8: loopback"},
		{"0.0.0.0:80", "0.0.0.0/8: unspecified"},
		{"0.1.2.3:80", "0.0.0.0/8: unspecified"},
		{"[::]:80", "::/128: unspecified"},
		{"[::ffff:0.0.0.0]:80", "0.0.0.0/8: unspecified"},
		{"169.254.169.254:80", "169.254.0.0/16: link-local, cloud metadata"},
		{"169.254.169.253:53", "169.254.0.0/16"},
		{"169.254.1.1:80", "169.254.0.0/16"},
		{"[::ffff:169.254.169.254]:80", "169.254.0.0/16"},
		{"[fe80::1]:80", "fe80::/10: link-local"},
		{"[fe80::1%eth0]:80", "fe80::/10: link-local"},
		{"[fd00:ec2::254]:80", "fd00:ec2::254/128: cloud metadata"},
		{"100.100.100.200:80", "100.100.100.200/32: cloud metadata"},
		{"10.1.2.3:10250", "@node: an address of this node"},
		{"[::ffff:10.1.2.3]:10250", "@node"},
		{"[2001:db8::7]:10250", "@node"},
		{"10.1.2.4:443", ""},
		{"10.96.0.10:53", ""},
		{"100.100.100.201:80", ""},
		{"[fd00:ec2::253]:80", ""},
		{"140.82.112.3:443", ""},
		{"[2606:4700::1111]:443", ""},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			ap, err := netip.ParseAddrPort(tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			err = g.CheckAddress(ap)
			checkRefusal(t, err, tc.want)
			// The dial hook judges the same.
			checkRefusal(t, g.control("tcp", tc.addr, nil), tc.want)
		})
	}
}

// TestCheckURL: literal addresses in URLs, blocked names, schemes.
func TestCheckURL(t *testing.T) {
	g := mustGuard(t)
	tests := []struct{ url, want string }{
		{"http://127.0.0.1:8080/token", "address 127.0.0.1 is blocked"},
		{"http://[::ffff:127.0.0.1]/", "address 127.0.0.1 is blocked"},
		{"http://[::]:80/", "address :: is blocked"},
		{"http://0.0.0.0/", "address 0.0.0.0 is blocked"},
		{"http://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is blocked"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "address fd00:ec2::254 is blocked"},
		{"http://100.100.100.200/latest/meta-data/", "address 100.100.100.200 is blocked"},
		{"http://METADATA.google.internal./computeMetadata/v1/", "host metadata.google.internal is blocked"},
		{"file:///etc/passwd", "want an http or https URL"},
		{"gopher://example.com/", "want an http or https URL"},
		// Names are judged when dialled (TestDialTimeCheck).
		{"http://localhost:8080/", ""},
		{"https://ghcr.io/v2/", ""},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			checkRefusal(t, g.CheckURL(u), tc.want)
		})
	}
}

// TestAllowlistIsParsed: the allowlist compares scheme, host, port and
// path segments, not string prefixes.
func TestAllowlistIsParsed(t *testing.T) {
	g := mustGuard(t, WithAllowlist([]string{"https://api.example.com/v1", "http://svc.tools.svc:8080/"}))
	tests := []struct{ url, want string }{
		{"https://api.example.com/v1", ""},
		{"https://api.example.com/v1/images?x=1", ""},
		{"https://API.example.com./v1/x", ""},
		{"https://api.example.com:443/v1/x", ""},
		{"http://svc.tools.svc:8080/anything", ""},
		{"https://api.example.com/v10", "not in the allowed URL prefixes"},
		{"https://api.example.com/v1/../admin", "not in the allowed URL prefixes"},
		{"https://api.example.com/v1/%2e%2e/admin", "not in the allowed URL prefixes"},
		{"https://api.example.com.evil.io/v1", "not in the allowed URL prefixes"},
		{"https://api.example.com@evil.io/v1", "not in the allowed URL prefixes"},
		{"http://api.example.com/v1", "not in the allowed URL prefixes"},
		{"https://api.example.com:8443/v1", "not in the allowed URL prefixes"},
		{"http://svc.tools.svc/anything", "not in the allowed URL prefixes"},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			checkRefusal(t, g.CheckURL(u), tc.want)
		})
	}
}

// TestAllowedAddresses: an explicit allow opens exactly what it names.
func TestAllowedAddresses(t *testing.T) {
	g := mustGuard(t, WithAllowedAddresses([]string{"127.0.0.1:5000", "::1", "169.254.10.0/24", "::ffff:10.1.2.3"}))
	tests := []struct{ addr, want string }{
		{"127.0.0.1:5000", ""},
		{"[::ffff:127.0.0.1]:5000", ""},
		{"127.0.0.1:5001", "127.0.0.0/8: loopback"},
		{"127.0.0.2:5000", "127.0.0.0/8: loopback"},
		{"[::1]:1", ""},
		{"169.254.10.9:80", ""},
		{"169.254.169.254:80", "169.254.0.0/16"},
		{"10.1.2.3:10250", ""},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			checkRefusal(t, g.CheckAddress(netip.MustParseAddrPort(tc.addr)), tc.want)
		})
	}
}

// TestNewRefusesBadEntries: each setting that does not parse is named.
func TestNewRefusesBadEntries(t *testing.T) {
	tests := []struct {
		opt  Option
		want string
	}{
		{WithBlocklist([]string{"10.0.0.0/33"}), `blocklist entry "10.0.0.0/33"`},
		{WithBlocklist([]string{"@nodes"}), `blocklist entry "@nodes"`},
		{WithAllowlist([]string{"api.example.com/v1"}), `allowlist entry "api.example.com/v1"`},
		{WithAllowlist([]string{"https://u:p@api.example.com/"}), `allowlist entry "https://u:p@api.example.com/"`},
		{WithAllowedAddresses([]string{"localhost:5000"}), `allowed address "localhost:5000"`},
		{WithAllowedAddresses([]string{"127.0.0.1:0"}), `allowed address "127.0.0.1:0"`},
		{WithAllowedAddresses([]string{"10.0.0.0/40"}), `allowed address "10.0.0.0/40"`},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			_, err := New(WithInterfaceAddrs(nodeAddrs), tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
	// An empty blocklist blocks nothing, not even the node's addresses.
	g := mustGuard(t, WithBlocklist([]string{}))
	if err := g.CheckAddress(netip.MustParseAddrPort("127.0.0.1:80")); err != nil {
		t.Errorf("empty blocklist: %v", err)
	}
}

// TestDialTimeCheck: a name that resolves to loopback passes the URL
// check but not the dial; a redirect from an allowed server to a blocked
// one is refused; an answer over the bound is an error naming it.
func TestDialTimeCheck(t *testing.T) {
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"token": "s3cr3t"}`)
	}))
	defer secret.Close()
	secretURL, _ := url.Parse(secret.URL)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, secret.URL+"/token", http.StatusFound)
		case "/big":
			_, _ = io.WriteString(w, strings.Repeat("x", 101))
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	defer front.Close()
	frontURL, _ := url.Parse(front.URL)

	hints := Hints{Blocklist: "--cel-http-blocklist", AllowAddress: "--egress-allow", MaxResponseBytes: "--egress-max-response-bytes"}
	// Only the front server is let through.
	g := mustGuard(t, WithAllowedAddresses([]string{frontURL.Host}), WithMaxResponseBytes(100), WithHints(hints))
	c := g.Client(nil)
	get := func(u string) (string, error) {
		resp, err := c.Get(u)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := g.ReadBody(resp.Body)
		return string(b), err
	}

	if body, err := get(front.URL + "/"); err != nil || body != "ok" {
		t.Fatalf("allowed server: %q, %v", body, err)
	}
	if _, err := get("http://localhost:" + secretURL.Port() + "/token"); !IsBlocked(err) ||
		!strings.Contains(err.Error(), "address 127.0.0.1 is blocked (--cel-http-blocklist 127.0.0.0/8: loopback; --egress-allow lets an address through)") &&
			!strings.Contains(err.Error(), "address ::1 is blocked") {
		t.Errorf("localhost: %v, want refused when dialled", err)
	}
	if body, err := get(front.URL + "/redirect"); !IsBlocked(err) || strings.Contains(body, "s3cr3t") {
		t.Errorf("redirect to a blocked server: %q, %v, want refused", body, err)
	}
	// The transport alone (a client with its own redirect policy, as
	// go-containerregistry's) checks every hop too.
	plainClient := &http.Client{Transport: g.Transport(nil)}
	if resp, err := plainClient.Get(front.URL + "/redirect"); !IsBlocked(err) {
		if resp != nil {
			resp.Body.Close()
		}
		t.Errorf("redirect through the bare transport: %v, want refused", err)
	}
	_, err := get(front.URL + "/big")
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || err.Error() != "the answer is larger than the limit of 100 bytes (--egress-max-response-bytes)" {
		t.Errorf("big answer: %v", err)
	}
	// No proxy: the address checked is the one dialled.
	if tr := g.Transport(nil).(*transport); tr.inner.Proxy != nil {
		t.Error("the guarded transport uses a proxy")
	}
}

// TestTimeout: a call that outlasts the guard's bound fails.
func TestTimeout(t *testing.T) {
	stall := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(stall)
	u, _ := url.Parse(slow.URL)
	g := mustGuard(t, WithAllowedAddresses([]string{u.Host}), WithTimeout(200*time.Millisecond))
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, slow.URL, nil)
	var timeout net.Error
	if _, err := g.Client(nil).Do(req); !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Errorf("slow server: %v, want a timeout", err)
	}
}

func checkRefusal(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("refused: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one containing %q", err, want)
	}
	if err != nil && !strings.Contains(err.Error(), "want an http") && !IsBlocked(err) {
		t.Errorf("%v is not a *BlockedError", fmt.Sprint(err))
	}
}
