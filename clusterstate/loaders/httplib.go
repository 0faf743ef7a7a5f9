package loaders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"

	"github.com/charter-dev/charter/engine"
)

// DefaultHTTPBlocklist is what the CEL http library may not reach unless
// the process says otherwise, as Kyverno's default: the cloud metadata
// endpoints and loopback. IP ranges are also checked against the address
// actually dialled, so a name that resolves into them is refused too.
var DefaultHTTPBlocklist = []string{"169.254.169.254", "169.254.169.253", "metadata.google.internal", "127.0.0.0/8", "::1/128"}

// HTTPLimits are what the CEL http library of policies may call.
type HTTPLimits struct {
	// Blocklist holds host names, IP addresses and CIDR ranges no call
	// may reach; nil means DefaultHTTPBlocklist, an empty list blocks
	// nothing.
	Blocklist []string
	// Allowlist, when not empty, holds the URL prefixes that are the
	// only ones a call may name (the blocklist still applies to them).
	Allowlist []string
	// AllowNamespacedPolicies lets namespaced policies call the library
	// (--allow-http-in-namespaced-policies); off, as Kyverno's
	// --allowHTTPInNamespacedPolicies, their calls fail.
	AllowNamespacedPolicies bool
}

// NamespacedHTTPRefusal is the fault of a namespaced policy's CEL http
// call, and of such a policy at admission, while
// HTTPLimits.AllowNamespacedPolicies is off; Kyverno's text with charter's
// flag.
const NamespacedHTTPRefusal = "http.* is not allowed in namespaced policies; set --allow-http-in-namespaced-policies to enable"

// Validate reports an entry of the blocklist that is neither a host, an
// address nor a CIDR range.
func (l HTTPLimits) Validate() error {
	_, err := newHTTPGuard(l)
	return err
}

// httpGuard is HTTPLimits parsed.
type httpGuard struct {
	hosts     map[string]bool
	prefixes  []netip.Prefix
	allowlist []string
}

func newHTTPGuard(l HTTPLimits) (*httpGuard, error) {
	block := l.Blocklist
	if block == nil {
		block = DefaultHTTPBlocklist
	}
	g := &httpGuard{hosts: map[string]bool{}, allowlist: l.Allowlist}
	for _, e := range block {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("http blocklist entry %q: %w", e, err)
			}
			g.prefixes = append(g.prefixes, p.Masked())
		default:
			if ip, err := netip.ParseAddr(e); err == nil {
				g.prefixes = append(g.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			g.hosts[strings.ToLower(e)] = true
		}
	}
	return g, nil
}

// checkURL refuses a URL outside the allowlist or naming a blocked host.
func (g *httpGuard) checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s: want an http or https URL", raw)
	}
	if len(g.allowlist) > 0 && !hasAnyPrefix(raw, g.allowlist) {
		return fmt.Errorf("%s is not in the allowed URL prefixes (--cel-http-allowlist)", raw)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if g.hosts[host] {
		return fmt.Errorf("host %s is blocked (--cel-http-blocklist)", host)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.checkIP(ip)
	}
	return nil
}

func (g *httpGuard) checkIP(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, p := range g.prefixes {
		if p.Contains(ip) {
			return fmt.Errorf("address %s is blocked (--cel-http-blocklist %s)", ip, p)
		}
	}
	return nil
}

// control checks the address a connection is about to dial, after name
// resolution.
func (g *httpGuard) control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	return g.checkIP(ip)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// guard returns the parsed limits, parsed on first use.
func (a *APICalls) guard() (*httpGuard, error) {
	a.guardOnce.Do(func() { a.httpGuard, a.guardErr = newHTTPGuard(a.HTTPLimits) })
	return a.httpGuard, a.guardErr
}

// libraryCall performs a CEL http library call and answers {body,
// statusCode} (engine.APICall.Library): a non-2xx status is no error and
// a body that is not JSON is null.
func (a *APICalls) libraryCall(ctx context.Context, method string, call engine.APICall, body []byte) (any, error) {
	if call.Namespace != "" && !a.HTTPLimits.AllowNamespacedPolicies {
		return nil, errors.New(NamespacedHTTPRefusal)
	}
	g, err := a.guard()
	if err != nil {
		return nil, err
	}
	if err := g.checkURL(call.URL); err != nil {
		return nil, err
	}
	client, err := a.client(call.CABundle, g)
	if err != nil {
		return nil, err
	}
	status, raw, err := a.doService(ctx, client, method, call, body)
	if err != nil {
		return nil, err
	}
	var decoded any
	if json.Unmarshal(raw, &decoded) != nil {
		decoded = nil
	}
	return map[string]any{"body": decoded, "statusCode": status}, nil
}

// statusOK is whether an apiCall entry's answer counts as an answer.
func statusOK(status int) bool { return status >= http.StatusOK && status < http.StatusMultipleChoices }

// Guarded returns an APICaller for GlobalContextEntries' apiCalls: a
// urlPath goes to the API server as an apiCall entry's does; a service
// URL is bound by the HTTP limits (--cel-http-blocklist, --cel-http-
// allowlist) as the CEL http library is, since a GlobalContextEntry, like
// a policy, should not make charter call cloud metadata or loopback. The
// answer is an apiCall entry's: decoded JSON, a non-2xx status an error.
func (a *APICalls) Guarded() engine.APICaller { return guardedCalls{a} }

type guardedCalls struct{ a *APICalls }

func (g guardedCalls) Call(ctx context.Context, call engine.APICall) (any, error) {
	return g.a.call(ctx, call, true)
}
