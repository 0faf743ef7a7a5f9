// Package controlplane runs a real Kubernetes control plane on this machine:
// etcd and kube-apiserver, built from Go modules by `make controlplane`, and
// on request kube-controller-manager (WithControllerManager), with no Docker
// and no kubelet. Pods are stored and admitted but never run, which is what
// policy work needs.
//
// Process management is controller-runtime's envtest; this package adds what
// charter's tests, `charter dev` and the harness need around it: finding the
// binaries (with a clear error when they are missing), a work folder holding
// the logs, certificates, etcd data and a kubeconfig file, keeping that folder
// when a run must be diagnosed, and installing CRDs.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/charter-dev/charter/internal/workdir"
)

// ContextName names the cluster, user and context in the kubeconfig file the
// control plane writes.
const ContextName = "charter-local"

// workDirPattern names the work folders a control plane makes for itself
// in the temporary folder.
const workDirPattern = "charter-controlplane-*"

// RemoveStaleWorkDirs removes the work folders in parent (the temporary
// folder when empty) that this user's control planes left behind when the
// process running them was killed before it could stop them, and returns
// their paths (see workdir.RemoveStale). Start calls it before making a
// work folder of its own.
func RemoveStaleWorkDirs(parent string) ([]string, error) {
	return workdir.RemoveStale(parent, workDirPattern)
}

const (
	defaultStartTimeout = 60 * time.Second
	defaultStopTimeout  = 20 * time.Second
)

// Option configures a ControlPlane.
type Option func(*options)

type options struct {
	binaryDir     string
	workDir       string
	crdDirs       []string
	keepWorkDir   bool
	startTimeout  time.Duration
	stopTimeout   time.Duration
	apiServerArgs map[string][]string
	controllerMgr bool
}

// WithBinaryDir sets the folder holding etcd and kube-apiserver. The default
// is DefaultBinaryDir. An explicit folder wins over $KUBEBUILDER_ASSETS.
func WithBinaryDir(dir string) Option { return func(o *options) { o.binaryDir = dir } }

// WithWorkDir sets the folder for logs, certificates, etcd data and the
// kubeconfig file. The folder belongs to the caller: Stop never removes it.
// The default is a fresh temporary folder that Stop removes unless the logs
// are kept.
func WithWorkDir(dir string) Option { return func(o *options) { o.workDir = dir } }

// WithCRDs installs the CRDs found in these folders (or files) once the API
// server is up, and waits until they are established.
func WithCRDs(paths ...string) Option {
	return func(o *options) { o.crdDirs = append(o.crdDirs, paths...) }
}

// WithKeepLogs keeps the work folder after Stop, whatever happens.
func WithKeepLogs(keep bool) Option { return func(o *options) { o.keepWorkDir = keep } }

// WithStartTimeout bounds how long each process may take to become healthy.
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = d } }

// WithStopTimeout bounds how long each process may take to exit after
// SIGTERM before it is killed.
func WithStopTimeout(d time.Duration) Option { return func(o *options) { o.stopTimeout = d } }

// WithAPIServerFlag sets a kube-apiserver flag (name without dashes),
// replacing the default value, e.g. WithAPIServerFlag("feature-gates", "X=true").
func WithAPIServerFlag(name string, values ...string) Option {
	return func(o *options) {
		if o.apiServerArgs == nil {
			o.apiServerArgs = map[string][]string{}
		}
		o.apiServerArgs[name] = values
	}
}

// WithControllerManager also runs kube-controller-manager (from the same
// binary folder), so that deleted namespaces are emptied and removed and
// objects whose owners are gone are garbage-collected, as in a real
// cluster. Tests that need neither leave it out: it costs a process.
func WithControllerManager() Option { return func(o *options) { o.controllerMgr = true } }

// ControlPlane is one etcd and one kube-apiserver. The zero value is not
// usable: call New. A ControlPlane starts once; Stop is safe to call at any
// time, any number of times, including after a failed Start.
type ControlPlane struct {
	opts options

	mu          sync.Mutex
	env         *envtest.Environment
	workDir     string
	ownsWorkDir bool
	keep        bool
	logs        []*os.File
	// lock is held while the control plane runs (see ownerLockFile).
	lock         *os.File
	staleRemoved []string
	cfg          *rest.Config
	kubeconfig   string
	kcm          *controllerManager
	started      bool
	stopped      bool
}

// New returns a control plane that is not started yet.
func New(opts ...Option) *ControlPlane {
	o := options{startTimeout: defaultStartTimeout, stopTimeout: defaultStopTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return &ControlPlane{opts: o, keep: o.keepWorkDir}
}

// Start creates a control plane with New and starts it.
func Start(ctx context.Context, opts ...Option) (*ControlPlane, error) {
	cp := New(opts...)
	if err := cp.Start(ctx); err != nil {
		return nil, err
	}
	return cp, nil
}

// Start launches etcd and kube-apiserver on free local ports (and
// kube-controller-manager when asked for), writes the
// kubeconfig file and installs the configured CRDs. On failure every process
// already started is stopped and the work folder is kept so its logs can be
// read; the error says where they are.
func (c *ControlPlane) Start(ctx context.Context) (err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return errors.New("control plane already started")
	}
	c.started = true

	binDir := c.opts.binaryDir
	if binDir == "" {
		if binDir, err = DefaultBinaryDir(); err != nil {
			return err
		}
	}
	etcdPath, apiServerPath, kcmPath, err := binaryPaths(binDir, c.opts.controllerMgr)
	if err != nil {
		return err
	}
	if err := c.prepareWorkDir(); err != nil {
		return err
	}
	binaries := filepath.Join(c.workDir, "bin")
	if etcdPath, err = watchedBinary(binaries, etcdPath); err != nil {
		return err
	}
	if apiServerPath, err = watchedBinary(binaries, apiServerPath); err != nil {
		return err
	}
	if kcmPath != "" {
		if kcmPath, err = watchedBinary(binaries, kcmPath); err != nil {
			return err
		}
	}
	defer func() {
		if err != nil {
			c.keep = true
			if stopErr := c.stopLocked(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			err = fmt.Errorf("%w\n%s", err, c.logTails())
		}
	}()

	etcdLog, err := c.openLog("etcd.log")
	if err != nil {
		return err
	}
	apiServerLog, err := c.openLog("kube-apiserver.log")
	if err != nil {
		return err
	}

	apiServer := &envtest.APIServer{
		Path:    apiServerPath,
		CertDir: filepath.Join(c.workDir, "pki"),
		Out:     apiServerLog,
		Err:     apiServerLog,
	}
	// Without a grace period, a stopping kube-apiserver waits on open
	// watches (charter's informers, a test's) until the stop timeout
	// kills it; with one, it ends them and waits at most that long.
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "5s")
	if err := configureFrontProxy(apiServer, filepath.Join(c.workDir, "front-proxy")); err != nil {
		return err
	}
	for name, values := range c.opts.apiServerArgs {
		apiServer.Configure().Set(name, values...)
	}
	c.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{
				Path:    etcdPath,
				DataDir: filepath.Join(c.workDir, "etcd"),
				Out:     etcdLog,
				Err:     etcdLog,
			},
			APIServer: apiServer,
			// envtest asks for kubectl's path even though nothing here runs it.
			KubectlPath: filepath.Join(binDir, "kubectl"),
		},
		ControlPlaneStartTimeout: c.opts.startTimeout,
		ControlPlaneStopTimeout:  c.opts.stopTimeout,
	}
	for _, dir := range []string{c.env.ControlPlane.Etcd.DataDir, apiServer.CertDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}

	// envtest cannot be interrupted while it waits for health checks; its
	// start timeout bounds the wait and ctx is honoured between steps.
	cfg, err := c.env.Start()
	if err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver from %s: %w", binDir, err)
	}
	c.cfg = cfg
	// envtest wrote webhook serving certificates to a temporary folder
	// of its own (envtest-serving-certs-*) that nothing here uses: remove
	// it now rather than at Stop, which a killed process never reaches.
	if err := c.env.WebhookInstallOptions.Cleanup(); err != nil {
		return fmt.Errorf("removing envtest's serving certificates: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	if kcmPath != "" {
		if err := c.startControllerManager(ctx, kcmPath); err != nil {
			return err
		}
	}

	// The kubeconfig's user is the administrator as kubeadm and kind name
	// it: what kubectl's requests say in userInfo, which policies read
	// (Kyverno's chainsaw test mutating-policies/context/userinfo/admission
	// expects kubernetes-admin). RESTConfig stays envtest's own admin.
	admin, err := c.env.ControlPlane.AddUser(envtest.User{Name: KubeconfigUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("creating the %s user: %w", KubeconfigUser, err)
	}
	c.kubeconfig = filepath.Join(c.workDir, "kubeconfig")
	if err := WriteKubeconfig(admin.Config(), c.kubeconfig); err != nil {
		return err
	}
	if len(c.opts.crdDirs) > 0 {
		if _, err := InstallCRDs(ctx, cfg, c.opts.crdDirs...); err != nil {
			return err
		}
	}
	return nil
}

func (c *ControlPlane) prepareWorkDir() error {
	if c.opts.workDir != "" {
		c.workDir = c.opts.workDir
		return os.MkdirAll(c.workDir, 0o700)
	}
	// A control plane whose process was killed left its folder behind
	// (its etcd and kube-apiserver died with it: see watchedBinary).
	// Failing to clean someone's leftovers is no reason not to start.
	c.staleRemoved, _ = RemoveStaleWorkDirs("")
	dir, err := os.MkdirTemp("", strings.TrimSuffix(workDirPattern, "*"))
	if err != nil {
		return fmt.Errorf("creating the control plane work folder: %w", err)
	}
	c.workDir, c.ownsWorkDir = dir, true
	if !c.keep {
		if c.lock, err = workdir.Lock(dir); err != nil {
			return err
		}
	}
	return nil
}

// StaleWorkDirsRemoved lists the work folders of killed control planes
// that Start removed.
func (c *ControlPlane) StaleWorkDirsRemoved() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.staleRemoved)
}

func (c *ControlPlane) openLog(name string) (*os.File, error) {
	dir := filepath.Join(c.workDir, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating control plane log file: %w", err)
	}
	c.logs = append(c.logs, f)
	return f, nil
}

// logTails returns where the logs are and their last lines, to explain a
// failed start without sending anyone hunting for files.
func (c *ControlPlane) logTails() string {
	var b strings.Builder
	fmt.Fprintf(&b, "control plane logs kept in %s", c.LogDir())
	for _, name := range logTailNames() {
		data, err := os.ReadFile(filepath.Join(c.LogDir(), name))
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 8 {
			lines = lines[len(lines)-8:]
		}
		fmt.Fprintf(&b, "\n--- last lines of %s:\n%s", name, strings.Join(lines, "\n"))
	}
	return b.String()
}

// RESTConfig returns a configuration for the cluster administrator (group
// system:masters). It is nil before a successful Start.
func (c *ControlPlane) RESTConfig() *rest.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg == nil {
		return nil
	}
	return rest.CopyConfig(c.cfg)
}

// EtcdURL is etcd's client URL (plain HTTP, on this machine), which also
// serves etcd's metrics at /metrics: how many keys it holds
// (etcd_debugging_mvcc_keys_total), read by tests that watch the
// cluster's storage grow. It is empty before a successful Start.
func (c *ControlPlane) EtcdURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg == nil || c.env.ControlPlane.Etcd.URL == nil {
		return ""
	}
	return c.env.ControlPlane.Etcd.URL.String()
}

// KubeconfigUser is the user of KubeconfigPath's file, in group
// system:masters, named as kubeadm and kind name the administrator.
const KubeconfigUser = "kubernetes-admin"

// KubeconfigPath is the kubeconfig file for the administrator
// (KubeconfigUser), usable by kubectl. It is empty before a successful
// Start.
func (c *ControlPlane) KubeconfigPath() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kubeconfig
}

// WorkDir is the folder holding logs/, pki/, etcd/ and kubeconfig.
func (c *ControlPlane) WorkDir() string { return c.workDir }

// LogDir is the folder holding etcd.log, kube-apiserver.log and
// kube-controller-manager.log.
func (c *ControlPlane) LogDir() string { return filepath.Join(c.workDir, "logs") }

// KeepLogs makes Stop leave the work folder in place, typically because a
// test failed and its logs are worth reading.
func (c *ControlPlane) KeepLogs() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keep = true
}

// LogsKept reports whether Stop leaves (or left) the work folder in place.
func (c *ControlPlane) LogsKept() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keep || !c.ownsWorkDir
}

// CopyLogs copies the control plane's log files into dir, creating it.
func (c *ControlPlane) CopyLogs(dir string) error {
	if c.workDir == "" {
		return errors.New("control plane never started: no logs to copy")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(c.LogDir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(c.LogDir(), e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Stop terminates kube-controller-manager, kube-apiserver then etcd (SIGTERM, then SIGKILL after the
// stop timeout), closes the log files and removes the work folder unless the
// logs are kept or the folder was given by the caller.
func (c *ControlPlane) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked()
}

func (c *ControlPlane) stopLocked() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	if c.kcm != nil {
		if err := c.kcm.stop(c.opts.stopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if c.env != nil {
		if err := c.env.ControlPlane.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
		}
		// In case Start failed before removing envtest's serving
		// certificates (see Start).
		if err := c.env.WebhookInstallOptions.Cleanup(); err != nil {
			errs = append(errs, fmt.Errorf("removing envtest's serving certificates: %w", err))
		}
	}
	for _, f := range c.logs {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ownsWorkDir && !c.keep && len(errs) == 0 {
		if err := os.RemoveAll(c.workDir); err != nil {
			errs = append(errs, fmt.Errorf("removing the control plane work folder: %w", err))
		}
	}
	if err := workdir.Unlock(c.lock, c.keep); err != nil {
		errs = append(errs, fmt.Errorf("unlocking the control plane work folder: %w", err))
	}
	c.lock = nil
	return errors.Join(errs...)
}

// RestartAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after the
// stop timeout, as a kubelet does) and starts it again on the same port, with the same
// certificates, users and etcd: what clients see of an API server
// restarted in place (an upgrade, a crash). RESTConfig and KubeconfigPath
// stay valid; watches end and requests fail while it is down. It returns
// once the new process is healthy. Other methods wait for it.
func (c *ControlPlane) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.env == nil || c.cfg == nil || c.stopped {
		return errors.New("restarting kube-apiserver: the control plane is not running")
	}
	apiServer := c.env.ControlPlane.APIServer
	// envtest's Stop and Start keep the port (SecurePort, set by the
	// first Start), the certificates in CertDir (written only when
	// missing) and the client CA its users were signed with.
	if err := apiServer.Stop(); err != nil {
		// A kube-apiserver draining heavy load can outlive the stop
		// timeout; envtest then kills it (SIGKILL), as a kubelet would.
		// Once its port is free it is gone, and starts again.
		addr := net.JoinHostPort(apiServer.SecureServing.Address, apiServer.SecureServing.Port)
		if waitErr := waitPortFree(ctx, addr, c.opts.stopTimeout); waitErr != nil {
			return fmt.Errorf("stopping kube-apiserver: %w", errors.Join(err, waitErr))
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("restarting kube-apiserver: stopped, not started again: %w", err)
	}
	if err := apiServer.Start(); err != nil {
		c.keep = true
		return fmt.Errorf("starting kube-apiserver again: %w\n%s", err, c.logTails())
	}
	return nil
}

// waitPortFree waits until nothing accepts connections at addr.
func waitPortFree(ctx context.Context, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil
		}
		conn.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still accepts connections %s after SIGKILL", addr, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WriteKubeconfig writes a kubeconfig file for cfg, with one cluster, user
// and context named ContextName, the current context.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[ContextName] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		CertificateAuthority:     cfg.CAFile,
	}
	kc.AuthInfos[ContextName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		ClientCertificate:     cfg.CertFile,
		ClientKey:             cfg.KeyFile,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts[ContextName] = &clientcmdapi.Context{Cluster: ContextName, AuthInfo: ContextName}
	kc.CurrentContext = ContextName
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
