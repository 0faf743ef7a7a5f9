package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ModulePath is the Go module whose root holds the bin/ folder that
// `make controlplane` fills.
const ModulePath = "github.com/charter-dev/charter"

// AssetsEnv names the folder holding etcd and kube-apiserver, the variable
// controller-runtime's envtest and the Makefile already agree on.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// The binaries a local control plane needs, by file name.
const (
	EtcdBinary              = "etcd"
	APIServerBinary         = "kube-apiserver"
	ControllerManagerBinary = "kube-controller-manager"
)

// MissingBinariesError says which control plane binaries are absent from a
// folder, and how to build them.
type MissingBinariesError struct {
	Dir     string
	Missing []string
}

func (e *MissingBinariesError) Error() string {
	return fmt.Sprintf("control plane binaries missing from %s: %s; run `make controlplane` to build etcd, kube-apiserver and kube-controller-manager into bin/ (or point %s at a folder holding them)",
		e.Dir, strings.Join(e.Missing, ", "), AssetsEnv)
}

// DefaultBinaryDir is where the control plane binaries are looked for when
// no folder is given: $KUBEBUILDER_ASSETS when set, else <module root>/bin,
// found by walking up from the working directory.
func DefaultBinaryDir() (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		return dir, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("finding the control plane binaries: %s is not set and %w; run from inside the charter repository after `make controlplane`, or set %s to a folder holding etcd and kube-apiserver", AssetsEnv, err, AssetsEnv)
	}
	return filepath.Join(root, "bin"), nil
}

// ModuleRoot returns the folder of charter's go.mod, walking up from the
// working directory. It lets tests, `go run` and the built binary started
// anywhere inside the repository find bin/ and config/.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if isCharterModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s in %s or any folder above it", ModulePath, wd)
		}
		dir = parent
	}
}

func isCharterModule(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == ModulePath
		}
	}
	return false
}

// binaryPaths checks that dir holds executable etcd and kube-apiserver
// binaries, and kube-controller-manager when withKCM, and returns their
// paths (kcm empty when not asked for).
func binaryPaths(dir string, withKCM bool) (etcd, apiServer, kcm string, err error) {
	var missing []string
	check := func(name string) string {
		p := filepath.Join(dir, name)
		fi, statErr := os.Stat(p)
		switch {
		case errors.Is(statErr, os.ErrNotExist):
			missing = append(missing, name)
		case statErr != nil:
			missing = append(missing, fmt.Sprintf("%s (%v)", name, statErr))
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			missing = append(missing, name+" (not an executable file)")
		}
		return p
	}
	etcd, apiServer = check(EtcdBinary), check(APIServerBinary)
	if withKCM {
		kcm = check(ControllerManagerBinary)
	}
	if len(missing) > 0 {
		return "", "", "", &MissingBinariesError{Dir: dir, Missing: missing}
	}
	return etcd, apiServer, kcm, nil
}
