package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// charterNamespace holds charter's Secrets and the PolicyRepositories.
const charterNamespace = "charter"

// charterProcess is `charter serve` running out of cluster.
type charterProcess struct {
	bin        string
	kubeconfig string
	cmd        *exec.Cmd
	exited     chan error
	logPath    string
	health     string
	receiver   string
}

// startCharter runs `charter serve --controllers=admission,gitsync` with
// the webhooks called by URL at 127.0.0.1. The kubeconfig goes through
// $KUBECONFIG, the way an in-cluster charter gets its configuration: then
// controller-runtime leaves client-side rate limiting to the API server's
// priority and fairness, as it does in a Deployment.
func startCharter(ctx context.Context, bin, kubeconfig, work, controllers string, flags ...string) (*charterProcess, error) {
	webhook, health, receiver := freePort(), freePort(), freePort()
	logPath := filepath.Join(work, "charter-"+strings.ReplaceAll(controllers, ",", "-")+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"serve", "--controllers=" + controllers,
		"--namespace=" + charterNamespace,
		"--webhook-addr=127.0.0.1:" + webhook,
		"--webhook-url=https://127.0.0.1:" + webhook,
		"--metrics-addr=0",
		"--health-addr=127.0.0.1:" + health,
		"--receiver-addr=127.0.0.1:" + receiver,
		"--gitsync-cache-dir=" + filepath.Join(work, "cache"),
		"--leader-elect=false",
	}, flags...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &charterProcess{
		bin: bin, kubeconfig: kubeconfig,
		cmd: cmd, exited: make(chan error, 1), logPath: logPath,
		health: "http://127.0.0.1:" + health, receiver: "http://127.0.0.1:" + receiver,
	}
	go func() { p.exited <- cmd.Wait(); logFile.Close() }()
	return p, nil
}

// waitReady waits for /readyz (with admission, its policy cache synced)
// and for the receiver to listen.
func (p *charterProcess) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case err := <-p.exited:
			return fmt.Errorf("charter exited: %v (log: %s)", err, p.logPath)
		default:
		}
		if p.ready(ctx) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("charter not ready after %s (log: %s)", timeout, p.logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *charterProcess) ready(ctx context.Context) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.health+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	// 404: no controller registered a readiness check (gitsync alone).
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		return false
	}
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(p.receiver, "http://"), time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// alive returns an error once the process has exited.
func (p *charterProcess) alive() error {
	select {
	case err := <-p.exited:
		p.exited <- err
		return fmt.Errorf("charter exited: %v", err)
	default:
		return nil
	}
}

// stop ends charter with SIGTERM, as a kubelet would, and deletes its
// webhook configurations so the cluster admits without it.
func (p *charterProcess) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
	}
	cleanup := exec.Command(p.bin, "serve", "--cleanup-webhooks", "--namespace="+charterNamespace)
	cleanup.Env = append(os.Environ(), "KUBECONFIG="+p.kubeconfig)
	if out, err := cleanup.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "benchgitops: charter serve --cleanup-webhooks: %v: %s\n", err, out)
	}
}

// memory returns the process's resident set size and its high-water mark,
// in bytes, from /proc/<pid>/status.
func (p *charterProcess) memory() (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", p.cmd.Process.Pid, name, err)
		}
		if name == "VmRSS" {
			rss = kib << 10
		} else {
			hwm = kib << 10
		}
	}
	return rss, hwm, sc.Err()
}

// rssSampler records the highest RSS seen until stopped.
type rssSampler struct {
	stopc chan struct{}
	done  chan int64
}

func (p *charterProcess) sampleRSS(every time.Duration) *rssSampler {
	s := &rssSampler{stopc: make(chan struct{}), done: make(chan int64, 1)}
	go func() {
		var peak int64
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if rss, _, err := p.memory(); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-s.stopc:
				s.done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop returns the peak.
func (s *rssSampler) stop() int64 {
	close(s.stopc)
	return <-s.done
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
