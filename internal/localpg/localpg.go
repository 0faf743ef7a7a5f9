// Package localpg runs a private PostgreSQL server on this machine for
// tests and `charter dev --reports-store=postgres`: initdb into a folder of
// the caller's, postgres listening on 127.0.0.1 on a free port with its
// socket in that folder, trust authentication for one user, no fsync. It
// uses Debian's postgresql package binaries (or $CHARTER_POSTGRES_BIN).
//
// PostgreSQL refuses to run as root; when this process is root the server
// runs as the user "nobody", which then owns the folder.
package localpg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinDirEnv names the environment variable that points at a folder holding
// initdb and postgres, winning over the installed packages.
const BinDirEnv = "CHARTER_POSTGRES_BIN"

// RequireEnv names the environment variable that, when set, makes a missing
// PostgreSQL a test failure instead of a skip (.ci/run sets it).
const RequireEnv = "CHARTER_REQUIRE_POSTGRES"

// User is the database user the server trusts, and Database the database
// the DSN names.
const (
	User     = "charter"
	Database = "postgres"
)

// ErrNotInstalled is returned by BinDir when no PostgreSQL binaries are found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed: apt-get install postgresql, or set " + BinDirEnv)

// BinDir finds the folder holding initdb and postgres: $CHARTER_POSTGRES_BIN,
// else the newest /usr/lib/postgresql/<version>/bin (Debian's layout).
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if !executable(filepath.Join(dir, "postgres")) || !executable(filepath.Join(dir, "initdb")) {
			return "", fmt.Errorf("%s=%s: no postgres and initdb executables there", BinDirEnv, dir)
		}
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first: 16 sorts after 9 by number, not by text.
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, dir := range dirs {
		if executable(filepath.Join(dir, "postgres")) && executable(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	return "", ErrNotInstalled
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Server is a running PostgreSQL server.
type Server struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start initialises a database cluster in dir/data (dir is created if
// missing; an existing cluster there is reused) and starts postgres on a
// free port of 127.0.0.1, waiting until it accepts connections. The log is
// dir/postgres.log. Stop the server with Stop.
func Start(ctx context.Context, dir string) (*Server, error) {
	binDir, err := BinDir()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the PostgreSQL folder: %w", err)
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := chownTree(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
			"-D", data, "-U", User, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
		initdb.Dir = dir
		setAttrs(initdb, cred)
		if out, err := initdb.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb %s: %w\n%s", data, err, out)
		}
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(binDir, "postgres"),
		"-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-k", dir,
		// A scratch database: durability is not worth the disk writes.
		"-F", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	setAttrs(cmd, cred)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	s := &Server{dir: dir, port: port, cmd: cmd, done: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("%w\n%s", err, s.logTail())
	}
	return s, nil
}

// DSN is the connection string of the server's database.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, s.port, Database)
}

// Dir is the folder holding data/ and postgres.log.
func (s *Server) Dir() string { return s.dir }

func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited before accepting connections: %v", s.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, s.DSN())
		if err == nil {
			err = conn.Ping(cctx)
			_ = conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("postgres did not accept connections within 60s: %v", lastErr)
}

func (s *Server) logTail() string {
	data, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "--- last lines of " + filepath.Join(s.dir, "postgres.log") + ":\n" + strings.Join(lines, "\n")
}

// Stop shuts the server down (fast shutdown: open sessions are ended) and
// waits for it, killing it after 20 seconds.
func (s *Server) Stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("postgres did not stop within 20s after SIGINT: killed")
	}
	return nil
}

// serverCredential is the user postgres runs as: nil (this process's) unless
// this process is root, which PostgreSQL refuses.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running PostgreSQL as root is refused and there is no user nobody: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port for postgres: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// TempDir makes a fresh folder for Start in parent (the temporary folder
// when empty) that the server's user can reach: mode 0711 rather than
// os.MkdirTemp's 0700, since under root the server runs as another user.
// The parent itself must be reachable by that user (the temporary folder
// is). It first removes the folders of killed servers there
// (RemoveStaleDirs).
func TempDir(parent string) (string, error) {
	// A folder it cannot check is left where it is: that must not keep a
	// new server from starting.
	_, _ = RemoveStaleDirs(parent)
	dir, err := os.MkdirTemp(parent, strings.TrimSuffix(dirPattern, "*"))
	if err != nil {
		return "", fmt.Errorf("creating the PostgreSQL folder: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", err
	}
	return dir, nil
}
