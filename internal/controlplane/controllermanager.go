package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControllerManagerUser is the identity kube-controller-manager
// authenticates as. The API server's bootstrap RBAC binds it to the
// system:kube-controller-manager ClusterRole, which lets it mint a token
// for each controller's own ServiceAccount in kube-system (see
// controllerManagerArgs): every controller then holds exactly the
// bootstrap role Kubernetes gives it, as in a real cluster.
const ControllerManagerUser = "system:kube-controller-manager"

// controllerManagerLog names kube-controller-manager's log file in LogDir.
const controllerManagerLog = "kube-controller-manager.log"

// controllerManager is a running kube-controller-manager process.
type controllerManager struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // how the process ended; read after done is closed
}

// startControllerManager runs kube-controller-manager against the API
// server c.env started, as ControllerManagerUser, and waits until its
// controllers work (the ServiceAccount controller has created the default
// ServiceAccount of namespace default). Without it nothing finishes a
// namespace deletion and no owner reference is ever collected.
func (c *ControlPlane) startControllerManager(ctx context.Context, binary string) error {
	user, err := c.env.ControlPlane.AddUser(envtest.User{Name: ControllerManagerUser}, nil)
	if err != nil {
		return fmt.Errorf("creating the %s user: %w", ControllerManagerUser, err)
	}
	kubeconfig := filepath.Join(c.workDir, "kube-controller-manager.kubeconfig")
	if err := WriteKubeconfig(user.Config(), kubeconfig); err != nil {
		return err
	}
	pki := c.env.ControlPlane.APIServer.CertDir
	rootCA := filepath.Join(pki, "ca.crt")
	if err := os.WriteFile(rootCA, c.cfg.CAData, 0o600); err != nil {
		return fmt.Errorf("writing the API server's CA for kube-controller-manager: %w", err)
	}
	logFile, err := c.openLog(controllerManagerLog)
	if err != nil {
		return err
	}

	signerCert, signerKey, err := writeCSRSigner(pki)
	if err != nil {
		return err
	}
	args := append(controllerManagerArgs(kubeconfig, rootCA, filepath.Join(pki, "sa-signer.key")),
		"--cluster-signing-kube-apiserver-client-cert-file="+signerCert,
		"--cluster-signing-kube-apiserver-client-key-file="+signerKey)
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, like etcd and kube-apiserver under envtest:
	// a Ctrl-C meant for `charter dev` must not kill it before Stop does.
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	km := &controllerManager{cmd: cmd, done: make(chan struct{})}
	go func() {
		km.err = cmd.Wait()
		close(km.done)
	}()
	c.kcm = km
	return km.waitWorking(ctx, c.cfg, c.opts.startTimeout)
}

// controllerManagerArgs are kube-controller-manager's flags: every default
// controller, no leader election (one process), no serving port (nothing
// scrapes it), and each controller with its own ServiceAccount's token,
// signed by the key the API server verifies (envtest's sa-signer).
func controllerManagerArgs(kubeconfig, rootCA, saKey string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + rootCA,
		"--v=1",
	}
}

// waitWorking waits until the default ServiceAccount of namespace default
// exists, the first thing kube-controller-manager's controllers do, or
// until the process ends or the timeout passes.
func (km *controllerManager) waitWorking(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		switch {
		case err == nil:
			return nil
		case !apierrors.IsNotFound(err) && ctx.Err() == nil:
			return fmt.Errorf("waiting for kube-controller-manager: %w", err)
		}
		select {
		case <-km.done:
			return fmt.Errorf("kube-controller-manager exited during start: %v", km.err)
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager: no default ServiceAccount in namespace default after %s: %w", timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM, then SIGKILL after timeout, and waits for the exit.
func (km *controllerManager) stop(timeout time.Duration) error {
	select {
	case <-km.done:
		return nil
	default:
	}
	if err := km.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping kube-controller-manager: %w", err)
	}
	select {
	case <-km.done:
		return nil
	case <-time.After(timeout):
	}
	if err := km.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing kube-controller-manager: %w", err)
	}
	<-km.done
	return nil
}

// logTailNames are the log files whose last lines explain a failed start.
func logTailNames() []string {
	return []string{"etcd.log", "kube-apiserver.log", controllerManagerLog}
}
