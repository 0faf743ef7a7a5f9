package jmespath

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// imageReference is a parsed container image reference.
type imageReference struct {
	registry string // e.g. "docker.io", "ghcr.io", "localhost:5000"
	path     string // e.g. "nginx", "library/nginx", "org/app"
	tag      string
	digest   string
}

// String renders the fully qualified form: a digest wins over a tag, and a
// reference with neither gets ":latest".
func (r imageReference) String() string {
	s := r.registry + "/" + r.path
	if r.digest != "" {
		return s + "@" + r.digest
	}
	tag := r.tag
	if tag == "" {
		tag = "latest"
	}
	return s + ":" + tag
}

var (
	// One path component of the distribution reference grammar.
	pathComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	tagPattern    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$`)
	hostPattern   = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?$`)
)

// parseImageReference parses image the way Docker does: the first path
// component is a registry only when it contains '.' or ':' or is "localhost"
// (and is lower case); otherwise defaultRegistry is used. Docker Hub names are
// not rewritten to "library/...", matching Kyverno.
func parseImageReference(image, defaultRegistry string) (imageReference, error) {
	var ref imageReference
	if image == "" {
		return ref, errors.New("empty image reference")
	}
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		ref.digest = name[i+1:]
		name = name[:i]
		if !digestPattern.MatchString(ref.digest) {
			return ref, fmt.Errorf("invalid image reference %q: invalid digest %q", image, ref.digest)
		}
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 && !strings.Contains(name[i+1:], "/") {
		ref.tag = name[i+1:]
		name = name[:i]
		if !tagPattern.MatchString(ref.tag) {
			return ref, fmt.Errorf("invalid image reference %q: invalid tag %q", image, ref.tag)
		}
	}
	ref.registry = defaultRegistry
	if i := strings.IndexByte(name, '/'); i >= 0 {
		first := name[:i]
		if (strings.ContainsAny(first, ".:") || first == "localhost") && strings.ToLower(first) == first {
			ref.registry = first
			name = name[i+1:]
			if !hostPattern.MatchString(ref.registry) {
				return ref, fmt.Errorf("invalid image reference %q: invalid registry %q", image, ref.registry)
			}
		}
	}
	for _, c := range strings.Split(name, "/") {
		if !pathComponent.MatchString(c) {
			return ref, fmt.Errorf("invalid image reference %q: invalid repository name %q", image, name)
		}
	}
	ref.path = name
	return ref, nil
}

func (e *env) fnImageNormalize(a []any) (any, error) {
	ref, err := parseImageReference(a[0].(string), e.defaultRegistry)
	if err != nil {
		return nil, err
	}
	return ref.String(), nil
}

// fnIsExternalURL reports whether the URL's host is neither loopback nor a
// private address. Host names are resolved, and any loopback or private
// address among the results makes the URL internal.
func (e *env) fnIsExternalURL(a []any) (any, error) {
	u, err := url.Parse(a[0].(string))
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("URL %q has no host", a[0])
	}
	internal := func(ip net.IP) bool { return ip.IsLoopback() || ip.IsPrivate() }
	if ip := net.ParseIP(host); ip != nil {
		return !internal(ip), nil
	}
	if e.lookupIP == nil {
		return nil, fmt.Errorf("cannot resolve host %q: name resolution is disabled", host)
	}
	ips, err := e.lookupIP(host)
	if err != nil {
		return nil, err
	}
	for _, ip := range ips {
		if internal(ip) {
			return false, nil
		}
	}
	return true, nil
}
