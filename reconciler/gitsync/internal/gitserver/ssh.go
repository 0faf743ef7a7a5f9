// Package gitserver serves Git repositories to tests the way real remotes
// do: over SSH through `git upload-pack`, with host keys the client must
// check and a client key it must present.
package gitserver

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSH is a running SSH Git server.
type SSH struct {
	// Addr is host:port.
	Addr string
	// Identity is the PEM private key the server accepts.
	Identity []byte
	// HostKeys are the server's host keys, by algorithm (ssh-ed25519,
	// ecdsa-sha2-nistp256).
	HostKeys map[string]ssh.PublicKey

	root string
}

// URL returns the ssh:// URL of the repository at path (relative to the
// server's root).
func (s *SSH) URL(path string) string {
	return "ssh://git@" + s.Addr + "/" + strings.TrimPrefix(filepath.ToSlash(path), "/")
}

// KnownHosts returns a known_hosts line for the host key of algorithm.
func (s *SSH) KnownHosts(algorithm string) []byte {
	return []byte(knownhosts.Line([]string{s.Addr}, s.HostKeys[algorithm]) + "\n")
}

// StartSSH serves the repositories under root over SSH on 127.0.0.1 until
// the test ends. The server offers an ed25519 and an ECDSA host key and
// accepts one client key, Identity; it runs only git-upload-pack.
func StartSSH(t testing.TB, root string) *SSH {
	t.Helper()
	s := &SSH{root: root, HostKeys: map[string]ssh.PublicKey{}}
	cfg := &ssh.ServerConfig{}

	_, edHost, err := ed25519.GenerateKey(rand.Reader)
	check(t, err)
	ecHost, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	check(t, err)
	for _, k := range []any{edHost, ecHost} {
		signer, err := ssh.NewSignerFromKey(k)
		check(t, err)
		cfg.AddHostKey(signer)
		s.HostKeys[signer.PublicKey().Type()] = signer.PublicKey()
	}

	clientPub, clientKey, err := ed25519.GenerateKey(rand.Reader)
	check(t, err)
	block, err := ssh.MarshalPrivateKey(clientKey, "")
	check(t, err)
	s.Identity = pem.EncodeToMemory(block)
	authorized, err := ssh.NewPublicKey(clientPub)
	check(t, err)
	cfg.PublicKeyCallback = func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if string(key.Marshal()) != string(authorized.Marshal()) {
			return nil, errors.New("unknown client key")
		}
		return nil, nil
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(t, err)
	s.Addr = ln.Addr().String()
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.serve(conn, cfg) })
		}
	})
	return s
}

func (s *SSH) serve(conn net.Conn, cfg *ssh.ServerConfig) {
	defer conn.Close()
	sconn, channels, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	defer sconn.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range channels {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, chReqs)
	}
}

// session runs the first exec request of a session.
func (s *SSH) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			if req.WantReply {
				_ = req.Reply(req.Type == "env", nil)
			}
			continue
		}
		command, ok := execPayload(req.Payload)
		dir, allowed := s.uploadPackDir(command)
		if !ok || !allowed {
			_ = req.Reply(false, nil)
			continue
		}
		_ = req.Reply(true, nil)
		code := s.uploadPack(ch, dir)
		_, _ = ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, uint32(code)))
		return
	}
}

// uploadPackDir parses "git-upload-pack '/path'" into the repository's
// folder under root.
func (s *SSH) uploadPackDir(command string) (string, bool) {
	arg, ok := strings.CutPrefix(command, "git-upload-pack ")
	if !ok {
		return "", false
	}
	rel := filepath.Clean("/" + strings.Trim(arg, `'"`))
	return filepath.Join(s.root, rel), true
}

func (s *SSH) uploadPack(ch ssh.Channel, dir string) int {
	cmd := exec.Command("git", "upload-pack", dir)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=true")
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(ch.Stderr(), err)
		return 1
	}
	// The client may keep its side open after the last pack; the process
	// ending is what ends the session.
	go func() {
		_, _ = io.Copy(stdin, ch)
		stdin.Close()
	}()
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		return 1
	}
	return 0
}

// execPayload decodes an exec request: one SSH string.
func execPayload(p []byte) (string, bool) {
	if len(p) < 4 {
		return "", false
	}
	n := binary.BigEndian.Uint32(p)
	if int(n) != len(p)-4 {
		return "", false
	}
	return string(p[4:]), true
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
