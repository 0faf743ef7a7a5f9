// Command genpods writes Pod manifests for `make bench-apply`: -n Pods in
// files of -per-file documents under -dir, every other Pod breaking the Pod
// Security Standards (host namespaces, privileged, host ports, hostPath,
// added capabilities, running as root).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

const compliant = `apiVersion: v1
kind: Pod
metadata:
  name: good-%[1]d
  namespace: team-%[2]d
  labels:
    app: web-%[1]d
spec:
  securityContext:
    runAsNonRoot: true
    seccompProfile:
      type: RuntimeDefault
  containers:
  - name: app
    image: registry.example.com/web:1.%[1]d
    ports:
    - containerPort: 8080
    securityContext:
      allowPrivilegeEscalation: false
      capabilities:
        drop: ["ALL"]
    resources:
      limits: {cpu: 100m, memory: 64Mi}
  volumes:
  - name: cache
    emptyDir: {}
`

const violating = `apiVersion: v1
kind: Pod
metadata:
  name: bad-%[1]d
  namespace: team-%[2]d
spec:
  hostNetwork: true
  hostPID: true
  containers:
  - name: app
    image: registry.example.com/web:latest
    ports:
    - containerPort: 8080
      hostPort: 8080
    securityContext:
      privileged: true
      runAsUser: 0
      capabilities:
        add: ["NET_ADMIN", "SYS_ADMIN"]
  volumes:
  - name: host
    hostPath:
      path: /var/run/docker.sock
`

func main() {
	n := flag.Int("n", 2000, "number of Pods")
	perFile := flag.Int("per-file", 250, "Pods per file")
	dir := flag.String("dir", "", "output directory (created)")
	flag.Parse()
	if *dir == "" || *n <= 0 || *perFile <= 0 {
		fmt.Fprintln(os.Stderr, "usage: genpods -dir DIR [-n 2000] [-per-file 250]")
		os.Exit(2)
	}
	if err := write(*dir, *n, *perFile); err != nil {
		fmt.Fprintln(os.Stderr, "genpods:", err)
		os.Exit(1)
	}
}

func write(dir string, n, perFile int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for start := 0; start < n; start += perFile {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("pods-%05d.yaml", start)))
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		for i := start; i < min(start+perFile, n); i++ {
			if i > start {
				fmt.Fprintln(w, "---")
			}
			tmpl := compliant
			if i%2 == 1 {
				tmpl = violating
			}
			fmt.Fprintf(w, tmpl, i, i%10)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
