package cluster

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	dockerUp := func(context.Context, string) error { return nil }
	dockerDown := func(context.Context, string) error {
		return errors.New("no Docker engine answered at unix:///var/run/docker.sock")
	}
	tests := []struct {
		name       string
		requested  string
		probe      func(context.Context, string) error
		want       string
		wantReason string
		wantErr    string
	}{
		{name: "empty, Docker answers", requested: "", probe: dockerUp, want: KindProvider, wantReason: "a Docker engine answered"},
		{name: "empty, no Docker", requested: "", probe: dockerDown, want: LocalProvider, wantReason: "no Docker engine (no Docker engine answered at unix:///var/run/docker.sock)"},
		{name: "blank counts as empty", requested: "  ", probe: dockerDown, want: LocalProvider},
		{name: "local, Docker answers", requested: "local", probe: dockerUp, want: LocalProvider, wantReason: "E2E_PROVIDER=local"},
		{name: "local, no Docker", requested: "local", probe: dockerDown, want: LocalProvider},
		{name: "kind, Docker answers", requested: "kind", probe: dockerUp, want: KindProvider, wantReason: "E2E_PROVIDER=kind"},
		{
			name: "kind, no Docker", requested: "kind", probe: dockerDown,
			wantErr: "E2E_PROVIDER=kind, but kind needs Docker: no Docker engine answered at unix:///var/run/docker.sock; set E2E_PROVIDER=local to use the local control plane",
		},
		{name: "unknown provider", requested: "minikube", probe: dockerUp, wantErr: `E2E_PROVIDER="minikube": want "kind", "local" or empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSettings(nil)
			s.probe = tt.probe
			got, err := choose(context.Background(), tt.requested, s)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("choose(%q) error = %v, want %q", tt.requested, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("choose(%q): %v", tt.requested, err)
			}
			if got.Provider != tt.want {
				t.Errorf("choose(%q) = %s, want %s", tt.requested, got.Provider, tt.want)
			}
			if tt.wantReason != "" && got.Reason != tt.wantReason {
				t.Errorf("choose(%q) reason = %q, want %q", tt.requested, got.Reason, tt.wantReason)
			}
		})
	}
}

func TestFromEnvironment(t *testing.T) {
	tests := []struct {
		env, want string
	}{
		{env: "local", want: LocalProvider},
		{env: "kind", want: KindProvider},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(EnvProvider, tt.env)
			p, sel, err := FromEnvironment(context.Background(), func(s *settings) {
				s.probe = func(context.Context, string) error { return nil }
			})
			if err != nil {
				t.Fatal(err)
			}
			if p.Name() != tt.want || sel.Provider != tt.want {
				t.Errorf("FromEnvironment with %s=%s: provider %s (selection %s), want %s", EnvProvider, tt.env, p.Name(), sel.Provider, tt.want)
			}
		})
	}
}

func TestNewUnknownProvider(t *testing.T) {
	if _, err := New("docker-desktop"); err == nil || !strings.Contains(err.Error(), `unknown cluster provider "docker-desktop"`) {
		t.Errorf("New(docker-desktop) error = %v", err)
	}
}

// serveDocker answers /_ping on a unix socket like a Docker engine would,
// or hangs when hang is set.
func serveDocker(t *testing.T, status int, hang bool) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		if r.URL.Path != "/_ping" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("OK"))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { close(stop); _ = srv.Close() })
	return "unix://" + sock
}

func TestPingDocker(t *testing.T) {
	tests := []struct {
		name    string
		host    func(t *testing.T) string
		wantErr string
	}{
		{name: "engine answers", host: func(t *testing.T) string { return serveDocker(t, http.StatusOK, false) }},
		{
			name:    "engine unhealthy",
			host:    func(t *testing.T) string { return serveDocker(t, http.StatusServiceUnavailable, false) },
			wantErr: "answered /_ping with 503 Service Unavailable",
		},
		{
			name:    "no socket",
			host:    func(t *testing.T) string { return "unix://" + filepath.Join(t.TempDir(), "absent.sock") },
			wantErr: "no Docker engine answered at unix://",
		},
		{
			name:    "engine hangs",
			host:    func(t *testing.T) string { return serveDocker(t, http.StatusOK, true) },
			wantErr: "context deadline exceeded",
		},
		{
			name:    "unsupported scheme",
			host:    func(*testing.T) string { return "ssh://builder@example.com" },
			wantErr: "only unix:// and tcp:// endpoints are probed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := pingDocker(context.Background(), tt.host(t))
			if elapsed := time.Since(start); elapsed > dockerProbeTimeout+time.Second {
				t.Errorf("probe took %s, more than its %s bound", elapsed, dockerProbeTimeout)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("pingDocker: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("pingDocker error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// On a machine without Docker, asking for kind fails at once and says why;
// Stop after that failed Start is harmless.
func TestKindWithoutDockerFailsFast(t *testing.T) {
	absent := "unix://" + filepath.Join(t.TempDir(), "absent.sock")
	p, err := New(KindProvider, WithDockerHost(absent))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = p.Start(context.Background())
	if err == nil {
		t.Fatal("kind started without Docker")
	}
	if elapsed := time.Since(start); elapsed > dockerProbeTimeout+time.Second {
		t.Errorf("failing took %s", elapsed)
	}
	if !strings.Contains(err.Error(), "kind needs Docker") || !strings.Contains(err.Error(), "local provider") {
		t.Errorf("error %q does not say kind needs Docker and to use the local provider", err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Errorf("Stop after failed Start: %v", err)
	}
	if p.RESTConfig() != nil || p.KubeconfigPath() != "" {
		t.Error("a kind provider that never started reports a cluster")
	}
}

func TestKindNodeImageFromEnvironment(t *testing.T) {
	t.Setenv(EnvKindNodeImage, "charter/kind-node:v1.36.3")
	if got := newSettings(environmentOptions()).kindNodeImage; got != "charter/kind-node:v1.36.3" {
		t.Errorf("%s set: node image %q", EnvKindNodeImage, got)
	}
	explicit := append(environmentOptions(), WithKindNodeImage("kindest/node:v1.36.0"))
	if got := newSettings(explicit).kindNodeImage; got != "kindest/node:v1.36.0" {
		t.Errorf("WithKindNodeImage after the environment: node image %q", got)
	}
	t.Setenv(EnvKindNodeImage, "")
	if got := newSettings(environmentOptions()).kindNodeImage; got != "" {
		t.Errorf("%s empty: node image %q, want kind's default", EnvKindNodeImage, got)
	}
}
