package source

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/skeema/knownhosts"
)

// Keys of a PolicyRepository's credentials Secret (the same contract as
// Flux's GitRepository).
const (
	KeyUsername    = "username"
	KeyPassword    = "password"
	KeyBearerToken = "bearerToken"
	KeyCA          = "ca.crt"
	KeyIdentity    = "identity"
	KeyKnownHosts  = "known_hosts"
)

// Auth is what a transport needs to reach a remote.
type Auth struct {
	Method   transport.AuthMethod
	CABundle []byte
	// secrets are the values masked out of every error message.
	secrets []string
}

// NewAuth builds the credentials for rawURL from a Secret's data (nil when
// the repository has no secretRef). SSH always checks host keys: an ssh://
// URL needs known_hosts. Credentials are refused over plain http://, where
// they would cross the network in clear.
func NewAuth(rawURL string, data map[string][]byte) (*Auth, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	a := &Auth{}
	for _, k := range []string{KeyPassword, KeyBearerToken, KeyIdentity} {
		if v := strings.TrimSpace(string(data[k])); len(v) >= 4 {
			a.secrets = append(a.secrets, v)
		}
	}
	switch u.Scheme {
	case "https", "http":
		a.CABundle = data[KeyCA]
		user, pass, token := string(data[KeyUsername]), string(data[KeyPassword]), string(data[KeyBearerToken])
		switch {
		case token != "" && (user != "" || pass != ""):
			return nil, errors.New("secret has both bearerToken and username/password; keep one")
		case token != "":
			a.Method = &githttp.TokenAuth{Token: token}
		case user != "" || pass != "":
			a.Method = &githttp.BasicAuth{Username: user, Password: pass}
		}
		if a.Method != nil && u.Scheme == "http" {
			return nil, fmt.Errorf("refusing to send credentials over plain http to %s; use https", u.Host)
		}
		if len(a.CABundle) > 0 && u.Scheme == "http" {
			return nil, errors.New("ca.crt is set but the URL is plain http")
		}
	case "ssh":
		if len(data[KeyKnownHosts]) == 0 {
			return nil, errors.New("ssh needs known_hosts in the secret: host keys are always checked")
		}
		port := u.Port()
		if port == "" {
			port = "22"
		}
		hostWithPort := net.JoinHostPort(u.Hostname(), port)
		hosts, err := knownHostsDB(data[KeyKnownHosts])
		if err != nil {
			return nil, err
		}
		algorithms := hosts.HostKeyAlgorithms(hostWithPort)
		if len(algorithms) == 0 {
			return nil, fmt.Errorf("known_hosts in the secret has no key for %s", hostWithPort)
		}
		user := u.User.Username()
		if user == "" {
			user = "git"
		}
		if len(data[KeyIdentity]) == 0 {
			return nil, errors.New("ssh needs an identity (private key) in the secret")
		}
		keys, err := gitssh.NewPublicKeys(user, data[KeyIdentity], string(data[KeyPassword]))
		if err != nil {
			return nil, fmt.Errorf("secret identity: %w", err)
		}
		// Offer only the host key algorithms known_hosts has keys of: a
		// server with several host keys would otherwise present one that
		// known_hosts does not list, and fail the check it should pass.
		keys.HostKeyCallback = hosts.HostKeyCallback()
		keys.HostKeyAlgorithms = algorithms
		a.Method = keys
	case "file":
		if len(data) > 0 {
			return nil, errors.New("file:// repositories take no credentials")
		}
	default:
		return nil, fmt.Errorf("unsupported URL scheme %q", u.Scheme)
	}
	return a, nil
}

// knownHostsDB parses known_hosts. go-git reads host keys from files
// only, so the data goes through a temporary file that is removed at once.
func knownHostsDB(knownHosts []byte) (*knownhosts.HostKeyDB, error) {
	f, err := os.CreateTemp("", "charter-known-hosts-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(knownHosts); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	db, err := gitssh.NewKnownHostsDb(f.Name())
	if err != nil {
		return nil, fmt.Errorf("secret known_hosts: %w", err)
	}
	return db, nil
}

// parseURL accepts scp-style addresses (git@host:path) as ssh:// URLs.
func parseURL(raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		if at, colon := strings.Index(raw, "@"), strings.Index(raw, ":"); at > 0 && colon > at {
			raw = "ssh://" + raw[:colon] + "/" + raw[colon+1:]
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid repository URL %q", SanitizeURL(raw))
	}
	return u, nil
}

// SanitizeURL drops the user info (user:password@) from a URL.
func SanitizeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.Index(raw, "://"); i >= 0 {
			if at := strings.LastIndex(raw, "@"); at > i {
				return raw[:i+3] + raw[at+1:]
			}
		}
		return raw
	}
	u.User = nil
	return u.String()
}

// sanitize removes credentials from a message: user info in any URL it
// contains, and every secret value.
func (a *Auth) sanitize(msg string) string {
	fields := strings.Fields(msg)
	for _, f := range fields {
		if strings.Contains(f, "://") && strings.Contains(f, "@") {
			msg = strings.ReplaceAll(msg, f, SanitizeURL(strings.Trim(f, `"'`)))
		}
	}
	if a != nil {
		for _, s := range a.secrets {
			msg = strings.ReplaceAll(msg, s, "***")
		}
	}
	return msg
}
