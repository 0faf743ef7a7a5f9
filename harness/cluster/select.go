package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// EnvProvider selects the provider: "kind", "local", or empty to choose
// by whether Docker answers.
const EnvProvider = "E2E_PROVIDER"

// EnvKindNodeImage names the node image of the kind clusters that
// FromEnvironment creates (make e2e-kind: the offline image of make
// kind-node-image); empty means kind's default image. An explicit
// WithKindNodeImage wins.
const EnvKindNodeImage = "KIND_NODE_IMAGE"

// dockerProbeTimeout bounds the Docker check, so that asking for kind on a
// machine without Docker fails at once rather than hanging.
const dockerProbeTimeout = 3 * time.Second

const defaultDockerHost = "unix:///var/run/docker.sock"

// Selection is which provider FromEnvironment chose, and why.
type Selection struct {
	Provider string
	Reason   string
}

// FromEnvironment returns the provider named by $E2E_PROVIDER, or, when it
// is empty, kind if a Docker engine answers and local otherwise. The
// Selection says which and why, for the test log.
func FromEnvironment(ctx context.Context, opts ...Option) (Provider, Selection, error) {
	opts = append(environmentOptions(), opts...)
	s := newSettings(opts)
	sel, err := choose(ctx, os.Getenv(EnvProvider), s)
	if err != nil {
		return nil, sel, err
	}
	p, err := New(sel.Provider, opts...)
	return p, sel, err
}

// environmentOptions are the options the environment sets, before the
// caller's (which win).
func environmentOptions() []Option {
	var opts []Option
	if image := os.Getenv(EnvKindNodeImage); image != "" {
		opts = append(opts, WithKindNodeImage(image))
	}
	return opts
}

func choose(ctx context.Context, requested string, s settings) (Selection, error) {
	switch strings.TrimSpace(requested) {
	case LocalProvider:
		return Selection{LocalProvider, EnvProvider + "=local"}, nil
	case KindProvider:
		if err := s.probe(ctx, s.dockerHost); err != nil {
			return Selection{}, fmt.Errorf("%s=kind, but kind needs Docker: %w; set %s=local to use the local control plane", EnvProvider, err, EnvProvider)
		}
		return Selection{KindProvider, EnvProvider + "=kind"}, nil
	case "":
		if err := s.probe(ctx, s.dockerHost); err != nil {
			return Selection{LocalProvider, "no Docker engine (" + err.Error() + ")"}, nil
		}
		return Selection{KindProvider, "a Docker engine answered"}, nil
	default:
		return Selection{}, fmt.Errorf("%s=%q: want %q, %q or empty", EnvProvider, requested, KindProvider, LocalProvider)
	}
}

// DockerAvailable reports, within a few seconds, whether kind could use
// Docker: the docker command is on PATH (kind drives Docker through it) and
// the engine at host ($DOCKER_HOST, else the standard socket, when host is
// empty) answers its /_ping endpoint.
func DockerAvailable(ctx context.Context, host string) error {
	if _, err := exec.LookPath("docker"); err != nil {
		return errors.New("the docker command is not on PATH")
	}
	return pingDocker(ctx, host)
}

func pingDocker(ctx context.Context, host string) error {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = defaultDockerHost
	}
	u, err := url.Parse(host)
	if err != nil {
		return fmt.Errorf("parsing Docker host %q: %w", host, err)
	}
	var network, address string
	switch u.Scheme {
	case "unix":
		network, address = "unix", u.Path
	case "tcp", "http":
		network, address = "tcp", u.Host
	default:
		return fmt.Errorf("Docker host %q: only unix:// and tcp:// endpoints are probed", host)
	}

	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	if network == "tcp" && os.Getenv("DOCKER_TLS_VERIFY") != "" {
		// A TLS endpoint wants client certificates this probe does not
		// load; an accepted connection is answer enough.
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, address)
		if err != nil {
			return fmt.Errorf("no Docker engine answered at %s: %w", host, err)
		}
		return conn.Close()
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, address)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("no Docker engine answered at %s: %w", host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the Docker engine at %s answered /_ping with %s %q", host, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
