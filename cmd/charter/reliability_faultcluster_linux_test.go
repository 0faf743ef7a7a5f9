package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

// faultNamespace is charter's namespace in the fault tests.
const faultNamespace = "charter"

// faultAuditPolicy makes the API server log the writes the fault tests
// count: UpdateRequests created (with their body, which names the
// trigger), and every write of NetworkPolicies (what the generate policy
// makes, by server-side apply) and ConfigMaps (what TTL cleanup deletes).
// The log backend writes an event before the response is sent
// (--audit-log-mode blocking, its default), so no counted write is
// missing from it.
const faultAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  verbs: [create]
  resources: [{group: kyverno.io, resources: [updaterequests]}]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - {group: networking.k8s.io, resources: [networkpolicies]}
  - {group: "", resources: [configmaps]}
- level: None
`

// faultCluster is a local control plane whose API server writes an audit
// log, and charter serve processes run against it as a cluster runs
// charter's Pods: each a child process that can be killed.
type faultCluster struct {
	t          *testing.T
	ctx        context.Context
	cp         *controlplane.ControlPlane
	cl         client.WithWatch
	kubeconfig string
	auditLog   string
	dir        string
	// webhookAddr is where every charter process of the test serves
	// admission, as a Service's address outlives the Pods behind it.
	webhookAddr string
	started     int
	// charterEnv is added to the environment of every charter started.
	charterEnv []string
}

func startFaultCluster(ctx context.Context, t *testing.T, opts ...controlplane.Option) *faultCluster {
	t.Helper()
	// The audit log and charter's logs stay when the test fails.
	dir, err := os.MkdirTemp("", "charter-faults-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("audit log and charter's logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(faultAuditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(dir, "audit.log")
	cp := controlplanetest.Start(ctx, t, append([]controlplane.Option{
		controlplane.WithAPIServerFlag("audit-policy-file", policy),
		controlplane.WithAPIServerFlag("audit-log-path", auditLog),
		controlplane.WithAPIServerFlag("audit-log-format", "json"),
	}, opts...)...)
	f := &faultCluster{
		t: t, ctx: ctx, cp: cp, kubeconfig: cp.KubeconfigPath(), auditLog: auditLog, dir: dir,
		webhookAddr: "127.0.0.1:" + strconv.Itoa(testPort(t)),
	}
	sch, err := serveScheme()
	if err != nil {
		t.Fatal(err)
	}
	if f.cl, err = client.NewWithWatch(f.restConfig(), client.Options{Scheme: sch}); err != nil {
		t.Fatal(err)
	}
	f.createNamespace(faultNamespace)
	return f
}

// restConfig is the administrator's configuration, with room for load.
func (f *faultCluster) restConfig() *rest.Config {
	cfg := f.cp.RESTConfig()
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg
}

func (f *faultCluster) createNamespace(name string) {
	f.t.Helper()
	if err := f.cl.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		f.t.Fatal(err)
	}
}

// apply creates the objects of a multi-document YAML text.
func (f *faultCluster) apply(docs string) []*unstructured.Unstructured {
	f.t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.UnmarshalStrict([]byte(doc), &u.Object); err != nil {
			f.t.Fatalf("%v in\n%s", err, doc)
		}
		if len(u.Object) == 0 {
			continue // comments only
		}
		if err := f.cl.Create(f.ctx, u); err != nil {
			f.t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		out = append(out, u)
	}
	return out
}

// waitReady waits until charter says each policy is ready.
func (f *faultCluster) waitReady(policies []*unstructured.Unstructured) {
	f.t.Helper()
	for _, p := range policies {
		waitFor(f.t, fmt.Sprintf("%s %s ready", p.GetKind(), p.GetName()), 2*time.Minute, func() error {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(p.GroupVersionKind())
			if err := f.cl.Get(f.ctx, client.ObjectKeyFromObject(p), cur); err != nil {
				return err
			}
			if ok, why := policyReady(cur); !ok {
				return errors.New(why)
			}
			return nil
		})
	}
}

// charterProcess is one charter serve, a child process.
type charterProcess struct {
	name   string
	cmd    *exec.Cmd
	log    string
	health string
	exited chan struct{}
	err    error
}

// startCharter starts charter serve with these controllers (and flags)
// as a child process: this test binary, which holds charter's commands,
// run as TestDevHelperProcess does. It does not wait for it to be ready.
// The test's end stops it if it still runs.
func (f *faultCluster) startCharter(controllers string, flags ...string) *charterProcess {
	f.t.Helper()
	f.started++
	p := &charterProcess{
		name:   fmt.Sprintf("charter-%d", f.started),
		health: "127.0.0.1:" + strconv.Itoa(testPort(f.t)),
		exited: make(chan struct{}),
	}
	p.log = filepath.Join(f.dir, p.name+".log")
	args := append([]string{"serve", "--controllers=" + controllers,
		"--kubeconfig=" + f.kubeconfig,
		"--namespace=" + faultNamespace,
		"--webhook-addr=" + f.webhookAddr,
		"--webhook-url=https://" + f.webhookAddr,
		"--metrics-addr=0",
		"--health-addr=" + p.health,
	}, flags...)
	logFile, err := os.Create(p.log)
	if err != nil {
		f.t.Fatal(err)
	}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestDevHelperProcess$")
	p.cmd.Env = append(append(os.Environ(), f.charterEnv...), devHelperEnv+"="+strings.Join(args, "\x1f"))
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	f.t.Cleanup(func() {
		p.stop(f.t)
		if f.t.Failed() {
			f.t.Logf("%s (%s): last lines of its log %s:\n%s", p.name, controllers, p.log, p.tail(20))
		}
	})
	return p
}

// waitHealthy waits until the process answers /readyz.
func (p *charterProcess) waitHealthy(t *testing.T) {
	t.Helper()
	waitFor(t, p.name+" ready", 2*time.Minute, func() error {
		select {
		case <-p.exited:
			t.Fatalf("%s exited (%v):\n%s", p.name, p.err, p.tail(30))
		default:
		}
		resp, err := http.Get("http://" + p.health + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
}

// kill sends SIGKILL, which charter cannot catch, and waits for the end.
func (p *charterProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("killing %s: %v", p.name, err)
	}
	<-p.exited
}

// stop asks charter to stop (SIGTERM), as a Pod's deletion does, and
// kills it if it has not within 30 s.
func (p *charterProcess) stop(t *testing.T) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Logf("%s did not stop within 30 s of SIGTERM: killed", p.name)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// running reports whether the process has not exited.
func (p *charterProcess) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// leaseTerms reads the process's log for the terms of leadership it began
// and ended, by Lease (internal/leadership logs "leading" and "stopped
// leading" with the Lease's namespace/name), and says whether it leads
// each Lease it ever led at the end: a Lease lost (under load, while the
// API server was away) must be led again, the process never exiting.
func (p *charterProcess) leaseTerms(t *testing.T) (lost map[string]int, leadsAll bool) {
	t.Helper()
	data, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	began, lost := map[string]int{}, map[string]int{}
	for _, m := range leaseTerm.FindAllStringSubmatch(string(data), -1) {
		if m[1] == "leading" {
			began[m[2]]++
		} else {
			lost[m[2]]++
		}
	}
	leadsAll = len(began) > 0
	for lease, n := range began {
		if n != lost[lease]+1 {
			leadsAll = false
		}
	}
	return lost, leadsAll
}

var leaseTerm = regexp.MustCompile(`"(leading|stopped leading)"[^\n]* lease="([^"]+)"`)

func (p *charterProcess) tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(data), n)
}

// auditEvent is what the fault tests read of an audit log event.
type auditEvent struct {
	Verb      string `json:"verb"`
	Stage     string `json:"stage"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage `json:"requestObject"`
}

// audited is every completed request of resource in the audit log.
func (f *faultCluster) audited(resource string) []auditEvent {
	f.t.Helper()
	file, err := os.Open(f.auditLog)
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	var out []auditEvent
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			f.t.Fatalf("audit log %s: %v", f.auditLog, err)
		}
		if ev.Stage == "ResponseComplete" && ev.ObjectRef.Resource == resource {
			out = append(out, ev)
		}
	}
	if err := sc.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// writeCounts tallies audited writes by namespace/name: objects
// created (a create or a server-side apply answered 201), deleted
// (answered 200) and every other write.
type writeCounts struct {
	created, deleted, other map[string]int
}

func countWrites(events []auditEvent) writeCounts {
	w := writeCounts{created: map[string]int{}, deleted: map[string]int{}, other: map[string]int{}}
	for _, ev := range events {
		key := ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name
		switch {
		case (ev.Verb == "create" || ev.Verb == "patch") && ev.ResponseStatus.Code == http.StatusCreated:
			w.created[key]++
		case ev.Verb == "delete" && ev.ResponseStatus.Code == http.StatusOK:
			w.deleted[key]++
		default:
			w.other[key]++
		}
	}
	return w
}

// waitFor polls check until it succeeds. within only bounds a wait for
// something that never comes (a failure), so it is generous: what the
// tests assert is the outcome, not how fast it came.
func waitFor(t *testing.T, what string, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testPort is a free local port (dev.go's freeLocalPort), or the test's
// end.
func testPort(t *testing.T) int {
	t.Helper()
	port, err := freeLocalPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
