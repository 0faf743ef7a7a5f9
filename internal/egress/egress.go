// Package egress is the one guard on every outbound call charter makes on
// a policy's behalf: apiCall service URLs, the CEL http library,
// GlobalContextEntry apiCalls, and the registries and transparency logs of
// image verification. A policy (or the image of a Pod a tenant creates)
// chooses the URL, so without the guard charter would fetch loopback
// services, the cloud metadata endpoint or the node's own ports from its
// own network position and hand the answer back in a message.
//
// The guard checks the address actually dialled (a net.Dialer Control
// hook), so a name that resolves, or rebinds, to a blocked address is
// refused at connect time; it checks the URL of every request its
// transport sends, so a redirect to a blocked host is refused as a first
// request would be; it ignores proxy settings, so the address checked is
// the one connected to; and it bounds the time of a call and the size of
// an answer.
package egress

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// NodeAddresses is the blocklist entry that stands for the addresses of
// this machine's own network interfaces (net.InterfaceAddrs): a service
// listening on the node (the kubelet, a hostNetwork Pod) is as off-limits
// as loopback. No host name holds '@', so it names no host.
const NodeAddresses = "@node"

// DefaultBlocklist is what no call may reach unless the process says
// otherwise: loopback, the unspecified ("this network") addresses,
// link-local (which holds the cloud metadata endpoints 169.254.169.254 and
// 169.254.169.253), the other cloud metadata addresses (AWS's IPv6
// fd00:ec2::254, Alibaba's 100.100.100.200, GCP's name), and the node's
// own addresses.
var DefaultBlocklist = []string{
	"127.0.0.0/8", "::1/128",
	"0.0.0.0/8", "::/128",
	"169.254.0.0/16", "fe80::/10",
	"fd00:ec2::254/128", "100.100.100.200/32", "metadata.google.internal",
	NodeAddresses,
}

// Defaults of the bounds of one call.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxResponseBytes = 2 << 20
	maxRedirects            = 10
)

// classes name the ranges of DefaultBlocklist in refusals, so a message
// says why an address is refused.
var classes = map[netip.Prefix]string{
	netip.MustParsePrefix("127.0.0.0/8"):        "loopback",
	netip.MustParsePrefix("::1/128"):            "loopback",
	netip.MustParsePrefix("0.0.0.0/8"):          "unspecified",
	netip.MustParsePrefix("::/128"):             "unspecified",
	netip.MustParsePrefix("169.254.0.0/16"):     "link-local, cloud metadata",
	netip.MustParsePrefix("fe80::/10"):          "link-local",
	netip.MustParsePrefix("fd00:ec2::254/128"):  "cloud metadata",
	netip.MustParsePrefix("100.100.100.200/32"): "cloud metadata",
}

// Guard decides what outbound calls may reach and bounds them. Build one
// with New; it is safe for concurrent use.
type Guard struct {
	blocked   []netip.Prefix
	hosts     map[string]bool
	nodeAddrs []netip.Addr
	allowed   []allowedAddress
	allowlist []urlPrefix
	timeout   time.Duration
	maxBody   int64
	hints     Hints
}

// Hints name, in refusals, the settings that change them (charter serve's
// flags), so whoever reads the error knows what to set.
type Hints struct {
	Blocklist, AllowAddress, Allowlist, MaxResponseBytes string
}

// Option configures a Guard.
type Option func(*config)

type config struct {
	blocklist []string
	allowlist []string
	allowed   []string
	timeout   time.Duration
	maxBody   int64
	nodeAddrs func() ([]net.Addr, error)
	hints     Hints
}

// WithBlocklist sets the host names, addresses, CIDR ranges and
// NodeAddresses no call may reach; nil keeps DefaultBlocklist, an empty
// list blocks nothing.
func WithBlocklist(entries []string) Option { return func(c *config) { c.blocklist = entries } }

// WithAllowlist, when not empty, limits calls to these URL prefixes. Each
// is parsed: a call matches when its scheme, host and port are the
// prefix's and its cleaned path is the prefix's path or below it, so
// "https://api.example.com/v1" admits https://api.example.com/v1/x but
// neither https://api.example.com.evil.io/v1, https://api.example.com@evil.io/v1
// nor /v10. The blocklist still applies to what it admits.
func WithAllowlist(prefixes []string) Option { return func(c *config) { c.allowlist = prefixes } }

// WithAllowedAddresses lets calls reach these addresses despite the
// blocklist: "127.0.0.1", "127.0.0.1:5000", "[::1]:8443", or a CIDR range
// such as "10.0.0.0/8" (any port). Tests and benches that serve a
// registry or an HTTP server on loopback name it here; nothing is allowed
// this way by default.
func WithAllowedAddresses(entries []string) Option { return func(c *config) { c.allowed = entries } }

// WithTimeout bounds one call, redirects included (DefaultTimeout when 0).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMaxResponseBytes bounds the answer ReadBody reads
// (DefaultMaxResponseBytes when 0).
func WithMaxResponseBytes(n int64) Option { return func(c *config) { c.maxBody = n } }

// WithInterfaceAddrs replaces net.InterfaceAddrs as the source of the
// node's own addresses (tests).
func WithInterfaceAddrs(f func() ([]net.Addr, error)) Option {
	return func(c *config) { c.nodeAddrs = f }
}

// WithHints names the settings behind a refusal in its message.
func WithHints(h Hints) Option { return func(c *config) { c.hints = h } }

// New parses the options into a Guard. A blocklist entry, allowlist prefix
// or allowed address that does not parse is an error naming it.
func New(opts ...Option) (*Guard, error) {
	c := config{nodeAddrs: net.InterfaceAddrs}
	for _, o := range opts {
		o(&c)
	}
	block := c.blocklist
	if block == nil {
		block = DefaultBlocklist
	}
	g := &Guard{hosts: map[string]bool{}, timeout: c.timeout, maxBody: c.maxBody, hints: c.hints}
	if g.timeout <= 0 {
		g.timeout = DefaultTimeout
	}
	if g.maxBody <= 0 {
		g.maxBody = DefaultMaxResponseBytes
	}
	node := false
	for _, e := range block {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case e == NodeAddresses:
			node = true
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("blocklist entry %q: %w", e, err)
			}
			g.blocked = append(g.blocked, p.Masked())
		case strings.HasPrefix(e, "@"):
			return nil, fmt.Errorf("blocklist entry %q: want a host, an address, a CIDR range or %s", e, NodeAddresses)
		default:
			if ip, err := netip.ParseAddr(e); err == nil {
				ip = plain(ip)
				g.blocked = append(g.blocked, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			g.hosts[normalHost(e)] = true
		}
	}
	if node {
		addrs, err := c.nodeAddrs()
		if err != nil {
			return nil, fmt.Errorf("blocklist entry %s: the node's addresses: %w", NodeAddresses, err)
		}
		for _, a := range addrs {
			s := a.String()
			if p, err := netip.ParsePrefix(s); err == nil {
				g.nodeAddrs = append(g.nodeAddrs, plain(p.Addr()))
			} else if ip, err := netip.ParseAddr(s); err == nil {
				g.nodeAddrs = append(g.nodeAddrs, plain(ip))
			}
		}
	}
	for _, e := range c.allowed {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		a, err := parseAllowedAddress(e)
		if err != nil {
			return nil, err
		}
		g.allowed = append(g.allowed, a)
	}
	for _, e := range c.allowlist {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		p, err := parseURLPrefix(e)
		if err != nil {
			return nil, err
		}
		g.allowlist = append(g.allowlist, p)
	}
	return g, nil
}

// Timeout is the bound of one call.
func (g *Guard) Timeout() time.Duration { return g.timeout }

// MaxResponseBytes is the bound of one answer.
func (g *Guard) MaxResponseBytes() int64 { return g.maxBody }

// BlockedError is a refused call: what was refused and why.
type BlockedError struct {
	// Target is what was refused: "address 127.0.0.1", "host
	// metadata.google.internal", "URL https://...".
	Target string
	// Reason says which rule refused it.
	Reason string
}

func (e *BlockedError) Error() string { return e.Target + " is blocked (" + e.Reason + ")" }

// TooLargeError is an answer over the bound.
type TooLargeError struct {
	Limit int64
	hint  string
}

func (e *TooLargeError) Error() string {
	if e.hint != "" {
		return fmt.Sprintf("the answer is larger than the limit of %d bytes (%s)", e.Limit, e.hint)
	}
	return fmt.Sprintf("the answer is larger than the limit of %d bytes", e.Limit)
}

// CheckURL refuses a URL that is not http(s), is outside the allowlist,
// or names a blocked host or address.
func (g *Guard) CheckURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s: want an http or https URL", u.Redacted())
	}
	if len(g.allowlist) > 0 && !g.inAllowlist(u) {
		return &BlockedError{Target: "URL " + u.Redacted(), Reason: "not in the allowed URL prefixes" + hint(g.hints.Allowlist)}
	}
	host := normalHost(u.Hostname())
	if g.hosts[host] {
		return &BlockedError{Target: "host " + host, Reason: join(g.hints.Blocklist, host)}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		// A name: the address it resolves to is checked when dialled.
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	n, _ := strconv.ParseUint(port, 10, 16)
	return g.CheckAddress(netip.AddrPortFrom(ip, uint16(n)))
}

// CheckAddress refuses an address (and port) the blocklist holds, unless
// an allowed address admits it. An IPv4 address wrapped in IPv6
// (::ffff:127.0.0.1, NAT64's 64:ff9b::/96, 6to4's 2002::/16, the old
// IPv4-compatible ::a.b.c.d) is checked as the IPv4 address too.
func (g *Guard) CheckAddress(ap netip.AddrPort) error {
	ip := plain(ap.Addr())
	for _, a := range g.allowed {
		if a.admits(ip, ap.Port()) {
			return nil
		}
	}
	for _, cand := range candidates(ip) {
		for _, p := range g.blocked {
			if p.Contains(cand) {
				reason := p.String()
				if c, ok := classes[p]; ok {
					reason += ": " + c
				}
				return &BlockedError{Target: "address " + ip.String(), Reason: g.blockedReason(reason)}
			}
		}
		for _, n := range g.nodeAddrs {
			if n == cand {
				return &BlockedError{Target: "address " + ip.String(), Reason: g.blockedReason(NodeAddresses + ": an address of this node")}
			}
		}
	}
	return nil
}

func (g *Guard) blockedReason(why string) string {
	s := join(g.hints.Blocklist, why)
	if g.hints.AllowAddress != "" {
		s += "; " + g.hints.AllowAddress + " lets an address through"
	}
	return s
}

// control checks the address a connection is about to dial, after name
// resolution: the check DNS rebinding cannot get past.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress: dialling %q: %w", address, err)
	}
	return g.CheckAddress(ap)
}

// Transport returns base (http.DefaultTransport's settings when nil),
// cloned, that dials only addresses the guard admits, uses no proxy (the
// address checked must be the one connected to), and checks the URL of
// every request it sends: redirects followed by any client of it are
// checked as the first request is.
func (g *Guard) Transport(base *http.Transport) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	t := base.Clone()
	t.Proxy = nil
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	t.DialContext = dialer.DialContext
	t.DialTLSContext = nil
	return &transport{guard: g, inner: t}
}

type transport struct {
	guard *Guard
	inner *http.Transport
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.guard.CheckURL(req.URL); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.inner.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// inner transport.
func (t *transport) CloseIdleConnections() { t.inner.CloseIdleConnections() }

// Client returns an HTTP client on the guard's Transport with tlsConfig
// (nil: the system roots), bounded by the guard's timeout, following at
// most ten redirects.
func (g *Guard) Client(tlsConfig *tls.Config) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tlsConfig
	return &http.Client{
		Transport: g.Transport(base),
		Timeout:   g.timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return g.CheckURL(req.URL)
		},
	}
}

// ReadBody reads an answer within the bound; a longer one is a
// *TooLargeError naming the limit.
func (g *Guard) ReadBody(r io.Reader) ([]byte, error) {
	// One byte past the limit tells a long answer from one that fits.
	raw, err := io.ReadAll(io.LimitReader(r, g.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if int64(len(raw)) > g.maxBody {
		return nil, &TooLargeError{Limit: g.maxBody, hint: g.hints.MaxResponseBytes}
	}
	return raw, nil
}

// IsBlocked reports whether err is (or wraps) a refusal of the guard.
func IsBlocked(err error) bool {
	var b *BlockedError
	return errors.As(err, &b)
}

// allowedAddress is an entry of WithAllowedAddresses.
type allowedAddress struct {
	prefix netip.Prefix
	port   uint16 // 0: any
}

func (a allowedAddress) admits(ip netip.Addr, port uint16) bool {
	return a.prefix.Contains(ip) && (a.port == 0 || a.port == port)
}

func parseAllowedAddress(e string) (allowedAddress, error) {
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return allowedAddress{}, fmt.Errorf("allowed address %q: %w", e, err)
		}
		p = netip.PrefixFrom(plain(p.Addr()), p.Bits()-unmappedBits(p.Addr()))
		return allowedAddress{prefix: p.Masked()}, nil
	}
	if ip, err := netip.ParseAddr(e); err == nil {
		ip = plain(ip)
		return allowedAddress{prefix: netip.PrefixFrom(ip, ip.BitLen())}, nil
	}
	ap, err := netip.ParseAddrPort(e)
	if err != nil || ap.Port() == 0 {
		return allowedAddress{}, fmt.Errorf("allowed address %q: want an address, address:port ([v6]:port) or a CIDR range", e)
	}
	ip := plain(ap.Addr())
	return allowedAddress{prefix: netip.PrefixFrom(ip, ip.BitLen()), port: ap.Port()}, nil
}

// unmappedBits is how many prefix bits an IPv4-mapped prefix loses when
// unmapped.
func unmappedBits(ip netip.Addr) int {
	if ip.Is4In6() {
		return 96
	}
	return 0
}

// urlPrefix is a parsed allowlist entry.
type urlPrefix struct {
	scheme, host, port, path string
}

func parseURLPrefix(e string) (urlPrefix, error) {
	u, err := url.Parse(e)
	if err != nil {
		return urlPrefix{}, fmt.Errorf("allowlist entry %q: %w", e, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return urlPrefix{}, fmt.Errorf("allowlist entry %q: want an http or https URL with a host and an optional path, such as https://api.example.com/v1", e)
	}
	return urlPrefix{scheme: u.Scheme, host: normalHost(u.Hostname()), port: portOf(u), path: cleanPath(u.Path)}, nil
}

func (g *Guard) inAllowlist(u *url.URL) bool {
	host, port, p := normalHost(u.Hostname()), portOf(u), cleanPath(u.Path)
	for _, a := range g.allowlist {
		if a.scheme != u.Scheme || a.host != host || a.port != port {
			continue
		}
		if a.path == "/" || p == a.path || strings.HasPrefix(p, strings.TrimSuffix(a.path, "/")+"/") {
			return true
		}
	}
	return false
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// cleanPath is the path a server normalising dot segments reads.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	return path.Clean("/" + p)
}

// normalHost lower-cases a host and drops a trailing dot and brackets, so
// METADATA.google.internal. is metadata.google.internal.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// plain is ip without an IPv6 zone and, when it is an IPv4-mapped IPv6
// address, as the IPv4 address.
func plain(ip netip.Addr) netip.Addr { return ip.WithZone("").Unmap() }

// candidates are ip and the IPv4 address it carries, if any: NAT64
// (64:ff9b::/96), 6to4 (2002::/16), and IPv4-compatible (::/96).
func candidates(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return []netip.Addr{ip}
	}
	b := ip.As16()
	var v4 [4]byte
	switch {
	case nat64.Contains(ip), compat.Contains(ip) && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback():
		copy(v4[:], b[12:])
	case sixToFour.Contains(ip):
		copy(v4[:], b[2:6])
	default:
		return []netip.Addr{ip}
	}
	return []netip.Addr{ip, netip.AddrFrom4(v4)}
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	compat    = netip.MustParsePrefix("::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func hint(flag string) string {
	if flag == "" {
		return ""
	}
	return ", " + flag
}

func join(flag, what string) string {
	if flag == "" {
		return what
	}
	return flag + " " + what
}

// Open returns a guard that blocks nothing (an empty blocklist, no
// allowlist), with the default bounds: for the CLI, which runs on the
// user's own machine with the user's own reach, as Kyverno's CLI does.
func Open() *Guard {
	g, err := New(WithBlocklist([]string{}))
	if err != nil {
		// An empty blocklist has nothing to parse.
		panic(err)
	}
	return g
}
