package gitsync

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/internal/reliability"
)

// TestReliabilityGitServerDown (issue #31, faults): the Git server of a
// PolicyRepository goes down (connections refused) for five intervals,
// and a commit is pushed meanwhile. Throughout, the last good revision
// stays applied and nothing in the cluster changes; the status says the
// fetch fails and why. Once the server is back, the new commit applies
// within one interval (and the sync itself).
func TestReliabilityGitServerDown(t *testing.T) {
	const interval = 2 * time.Second
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	good := src.commit(map[string]string{"down.yaml": policy("rel-down", "team")}, nil)
	const password = "down-Passw0rd-for-test"
	server := httpGitServer(t, filepath.Dir(src.dir), "charter", password)
	proxy := newSwitchableProxy(t, server.URL)
	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-auth"},
		Data:       map[string][]byte{"username": []byte("charter"), "password": []byte(password), "ca.crt": server.CA},
	})).To(Succeed())
	repo := newPolicyRepository(t, ns, proxy.url(server.URL)+"/"+filepath.Base(src.dir), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.SecretRef = &corev1.LocalObjectReference{Name: "git-auth"}
		r.Spec.Interval = &metav1.Duration{Duration: interval}
	})
	readyAt(t, repo, good)
	before, err := reliability.Snapshot(t.Context(), testConfig)
	g.Expect(err).NotTo(HaveOccurred())

	proxy.down()
	pushed := src.commit(map[string]string{"down.yaml": policy("rel-down", "pushed-while-down")}, nil)
	var lost []string
	var last *gitopsv1alpha1.PolicyRepository
	for deadline := time.Now().Add(5 * interval); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		last = eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {})
		if last.Status.LastAppliedRevision != good {
			lost = append(lost, "last applied "+last.Status.LastAppliedRevision)
		}
	}
	ready := condition(last, gitopsv1alpha1.ConditionReady)
	saysWhy := ready.Status == metav1.ConditionFalse && ready.Reason == gitopsv1alpha1.ReasonFetchFailed &&
		strings.Contains(ready.Message, "connection refused")
	t.Logf("after five intervals down: Ready %s %s: %s", ready.Status, ready.Reason, ready.Message)
	after, err := reliability.Snapshot(t.Context(), testConfig)
	g.Expect(err).NotTo(HaveOccurred())
	changes := before.Diff(after)

	proxy.up()
	back := time.Now()
	readyAt(t, repo, pushed)
	recovered := time.Since(back)
	g.Expect(getPolicy(t, "rel-down").Spec.Rules[0].Name).To(Equal("require-pushed-while-down"))

	reliability.Report(t, reliability.Figure{
		Part: "fault: Git server down for five intervals",
		Figure: fmt.Sprintf("last good revision applied throughout: %t; %d changes; status says why (Ready False %s, connection refused): %t; new commit applied %s after the server returned (interval %s)",
			len(lost) == 0, len(changes), ready.Reason, saysWhy, recovered.Round(100*time.Millisecond), interval),
		Target: fmt.Sprintf("kept, 0 changes, said, recovered within 1 interval and the sync (%s)", interval+time.Second),
		OK:     len(lost) == 0 && len(changes) == 0 && saysWhy && recovered <= interval+time.Second,
	})
	for _, c := range append(lost, changes...) {
		t.Log(c)
	}
}

// switchableProxy forwards TCP connections on a local port to a server;
// down closes the port and every connection through it, so clients are
// refused as by a server that is down, and up opens the same port again.
type switchableProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

// newSwitchableProxy forwards to the host of serverURL; it is up.
func newSwitchableProxy(t *testing.T, serverURL string) *switchableProxy {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &switchableProxy{t: t, addr: "127.0.0.1:0", target: u.Host, conns: map[net.Conn]bool{}}
	p.up()
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.down)
	return p
}

// url is serverURL with the proxy's address for its host.
func (p *switchableProxy) url(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		p.t.Fatal(err)
	}
	u.Host = p.addr
	return u.String()
}

func (p *switchableProxy) up() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy up on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *switchableProxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	_, _ = io.Copy(c, s)
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *switchableProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}
