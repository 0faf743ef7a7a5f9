// Package tiltfile keeps the repository's Tiltfile honest. Tilt cannot be
// installed on the machines this project is built on, so its test runs the
// Tiltfile in a Starlark interpreter with each Tilt function it calls
// modelled, in every --mode, and checks that every command, make target,
// path and resource it names exists and that what it deploys renders.
package tiltfile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/helmchart"
)

// root is the repository root, where Tilt runs the Tiltfile.
var root = filepath.Join("..", "..")

// localResource is a local_resource call.
type localResource struct {
	name, cmd, serveCmd string
	deps, resourceDeps  []string
}

// imageBuild is a docker_build or custom_build call.
type imageBuild struct {
	ref string
	// paths are what it reads: docker_build's context, Dockerfile and
	// only; custom_build's deps.
	paths []string
	// command is custom_build's.
	command string
}

// workload is an object k8s_yaml deploys that Tilt makes a resource of.
type workload struct{ kind, name string }

// tiltRun is what one run of the Tiltfile asked Tilt to do.
type tiltRun struct {
	localResources []localResource
	imageBuilds    []imageBuild
	kustomized     []string   // kustomize() paths
	charts         []string   // helm() chart paths
	deployed       []workload // from k8s_yaml
	images         []string   // container images of what is deployed
	k8sResources   []string   // k8s_resource workloads
}

// runTiltfile executes the Tiltfile as `tilt up -- args...` would.
func runTiltfile(t *testing.T, args map[string]string) (*tiltRun, error) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "Tiltfile"))
	if err != nil {
		t.Fatal(err)
	}
	run := &tiltRun{}
	defined := map[string]bool{}
	parsed := starlark.NewDict(len(args))
	predeclared := starlark.StringDict{
		"config": starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"define_string": starlark.NewBuiltin("config.define_string", func(_ *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var name, usage string
				if err := starlark.UnpackArgs(b.Name(), a, kw, "name", &name, "args?", new(bool), "usage?", &usage); err != nil {
					return nil, err
				}
				defined[name] = true
				return starlark.None, nil
			}),
			"parse": starlark.NewBuiltin("config.parse", func(_ *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				for name, value := range args {
					if !defined[name] {
						return nil, fmt.Errorf("tilt up -- --%s: the Tiltfile defines no such flag", name)
					}
					_ = parsed.SetKey(starlark.String(name), starlark.String(value))
				}
				return parsed, nil
			}),
		}),
		"local_resource": starlark.NewBuiltin("local_resource", func(_ *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			var r localResource
			var deps, resourceDeps, labels *starlark.List
			if err := starlark.UnpackArgs(b.Name(), a, kw, "name", &r.name, "cmd?", &r.cmd, "serve_cmd?", &r.serveCmd,
				"deps?", &deps, "resource_deps?", &resourceDeps, "labels?", &labels); err != nil {
				return nil, err
			}
			r.deps, r.resourceDeps = stringList(deps), stringList(resourceDeps)
			run.localResources = append(run.localResources, r)
			return starlark.None, nil
		}),
		"docker_build": starlark.NewBuiltin("docker_build", func(_ *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			var ref, context string
			dockerfile := "Dockerfile"
			var only *starlark.List
			if err := starlark.UnpackArgs(b.Name(), a, kw, "ref", &ref, "context", &context, "dockerfile?", &dockerfile, "only?", &only); err != nil {
				return nil, err
			}
			run.imageBuilds = append(run.imageBuilds, imageBuild{ref: ref, paths: append([]string{context, filepath.Join(context, dockerfile)}, stringList(only)...)})
			return starlark.None, nil
		}),
		"custom_build": starlark.NewBuiltin("custom_build", func(_ *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			var ref, command string
			var deps *starlark.List
			if err := starlark.UnpackArgs(b.Name(), a, kw, "ref", &ref, "command", &command, "deps", &deps); err != nil {
				return nil, err
			}
			run.imageBuilds = append(run.imageBuilds, imageBuild{ref: ref, command: command, paths: stringList(deps)})
			return starlark.None, nil
		}),
		"kustomize": starlark.NewBuiltin("kustomize", func(_ *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			var path string
			if err := starlark.UnpackArgs(b.Name(), a, kw, "path", &path); err != nil {
				return nil, err
			}
			run.kustomized = append(run.kustomized, path)
			rendered, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, path))
			if err != nil {
				return nil, fmt.Errorf("kustomize(%q): %w", path, err)
			}
			stream, err := rendered.AsYaml()
			if err != nil {
				return nil, err
			}
			return starlark.Bytes(stream), nil
		}),
		// helm renders the chart as `helm template` does, through Helm's
		// Go packages: CRDs included, as Tilt's helm() has them.
		"helm": starlark.NewBuiltin("helm", func(_ *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			var path, name, namespace string
			var set *starlark.List
			if err := starlark.UnpackArgs(b.Name(), a, kw, "paths", &path, "name?", &name, "namespace?", &namespace, "set?", &set); err != nil {
				return nil, err
			}
			run.charts = append(run.charts, path)
			values := map[string]any{}
			for _, kv := range stringList(set) {
				if err := strvals.ParseInto(kv, values); err != nil {
					return nil, fmt.Errorf("helm(%q) set %q: %w", path, kv, err)
				}
			}
			r, err := helmchart.Render(filepath.Join(root, path), helmchart.Options{ReleaseName: name, Namespace: namespace, Values: values})
			if err != nil {
				return nil, fmt.Errorf("helm(%q): %w", path, err)
			}
			var stream []byte
			for _, obj := range append(append(r.CRDs, r.Objects...), r.Hooks...) {
				doc, err := yaml.Marshal(obj.Object)
				if err != nil {
					return nil, err
				}
				stream = append(append(stream, "---\n"...), doc...)
			}
			return starlark.Bytes(stream), nil
		}),
		// k8s_yaml takes YAML or the path of a file of it.
		"k8s_yaml": starlark.NewBuiltin("k8s_yaml", func(_ *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			var arg starlark.Value
			if err := starlark.UnpackArgs(b.Name(), a, kw, "yaml", &arg); err != nil {
				return nil, err
			}
			var stream []byte
			switch v := arg.(type) {
			case starlark.Bytes:
				stream = []byte(v)
			case starlark.String:
				data, err := os.ReadFile(filepath.Join(root, string(v)))
				if err != nil {
					return nil, fmt.Errorf("k8s_yaml(%q): %w", string(v), err)
				}
				stream = data
			default:
				return nil, fmt.Errorf("k8s_yaml: want YAML or a path, got %s", arg.Type())
			}
			deployed, images, err := workloads(stream)
			run.deployed = append(run.deployed, deployed...)
			run.images = append(run.images, images...)
			return starlark.None, err
		}),
		"k8s_resource": starlark.NewBuiltin("k8s_resource", func(_ *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			var name string
			var labels *starlark.List
			if err := starlark.UnpackArgs(b.Name(), a, kw, "workload", &name, "labels?", &labels); err != nil {
				return nil, err
			}
			run.k8sResources = append(run.k8sResources, name)
			return starlark.None, nil
		}),
	}
	thread := &starlark.Thread{Name: "Tiltfile"}
	// Tilt's dialect: top-level if/for, reassigned globals, while, sets.
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
	_, err = starlark.ExecFileOptions(opts, thread, "Tiltfile", src, predeclared)
	return run, err
}

func TestTiltfileLocalMode(t *testing.T) {
	run, err := runTiltfile(t, nil)
	if err != nil {
		t.Fatalf("tilt up: %v", err)
	}
	if len(run.localResources) == 0 || len(run.imageBuilds) != 0 || len(run.k8sResources) != 0 {
		t.Fatalf("tilt up (local, the default) ran %d local resources, %d image builds, %d k8s resources; want local resources only",
			len(run.localResources), len(run.imageBuilds), len(run.k8sResources))
	}
	targets := makeTargets(t)
	names := map[string]localResource{}
	for _, r := range run.localResources {
		names[r.name] = r
	}
	for _, r := range run.localResources {
		// built is what this resource may use before it exists: what the
		// make targets of the resources it waits for write into bin/.
		var built []string
		for _, dep := range r.resourceDeps {
			d, ok := names[dep]
			if !ok {
				t.Errorf("local_resource %s: resource_deps names %q, which the Tiltfile does not define", r.name, dep)
				continue
			}
			built = append(built, outputs(t, d.cmd, targets)...)
		}
		for _, cmd := range []string{r.cmd, r.serveCmd} {
			if cmd != "" {
				checkCommand(t, "local_resource "+r.name, cmd, targets, built)
			}
		}
		for _, dep := range r.deps {
			if !exists(dep) && !slices.Contains(built, dep) {
				t.Errorf("local_resource %s: deps names %s, which neither exists nor is built by its resource_deps", r.name, dep)
			}
		}
		if slices.Contains(strings.Fields(r.cmd), "build") {
			checkCoversSources(t, "local_resource "+r.name+" deps", r.deps)
		}
	}
}

func TestTiltfileClusterMode(t *testing.T) {
	run, err := runTiltfile(t, map[string]string{"mode": "cluster"})
	if err != nil {
		t.Fatalf("tilt up -- --mode=cluster: %v", err)
	}
	if len(run.localResources) != 0 || len(run.imageBuilds) != 1 || !slices.Equal(run.charts, []string{"charts/charter"}) {
		t.Fatalf("--mode=cluster ran %d local resources, %d image builds, helm charts %v; want one image and charts/charter",
			len(run.localResources), len(run.imageBuilds), run.charts)
	}
	// Every controller's Deployment is a Tilt resource of its own.
	for _, w := range run.deployed {
		if w.kind == "Deployment" && !slices.Contains(run.k8sResources, w.name) {
			t.Errorf("Deployment %s is deployed but no k8s_resource names it", w.name)
		}
	}
	// Tilt's helm() renders hooks as plain objects, which it would apply
	// at once: the uninstall hook must be off.
	if slices.ContainsFunc(run.deployed, func(w workload) bool { return w.kind == "Job" }) {
		t.Errorf("--mode=cluster deploys a Job (the chart's uninstall hook?): %v", run.deployed)
	}
	build := run.imageBuilds[0]
	for _, path := range build.paths {
		if !exists(path) {
			t.Errorf("image build %q names %s, which does not exist", build.ref, path)
		}
	}
	if build.command != "" {
		checkCommand(t, "custom_build "+build.ref, build.command, makeTargets(t), nil)
	}
	checkCoversSources(t, "image build "+build.ref, build.paths)
	// Tilt substitutes its image only where a container names the ref.
	if !slices.ContainsFunc(run.images, func(image string) bool { return imageName(image) == build.ref }) {
		t.Errorf("docker_build(%q): no deployed container runs that image (images: %v)", build.ref, run.images)
	}
	for _, name := range run.k8sResources {
		if !slices.ContainsFunc(run.deployed, func(w workload) bool { return w.name == name }) {
			t.Errorf("k8s_resource(%q): no such workload in what k8s_yaml deploys (%v)", name, run.deployed)
		}
	}
}

func TestTiltfileUnknownModeFails(t *testing.T) {
	_, err := runTiltfile(t, map[string]string{"mode": "clustre"})
	if err == nil || !strings.Contains(err.Error(), `unknown --mode "clustre"`) {
		t.Fatalf("tilt up -- --mode=clustre: err = %v, want it refused by name", err)
	}
}

// checkCommand checks a shell command a local resource runs: make with
// targets the Makefile defines, or a program that exists (or is built by
// the resource's resource_deps) with, for charter, a subcommand it has.
func checkCommand(t *testing.T, resource, cmd string, targets map[string]string, built []string) {
	t.Helper()
	words := strings.Fields(cmd)
	switch program := words[0]; {
	case program == "make":
		for _, target := range words[1:] {
			if strings.Contains(target, "=") {
				continue // a variable: make image IMG=$EXPECTED_REF
			}
			if _, ok := targets[target]; !ok {
				t.Errorf("%s: %q runs make target %s, which the Makefile does not define", resource, cmd, target)
			}
		}
	case exists(program) || slices.Contains(built, program):
		if filepath.Base(program) == "charter" && len(words) > 1 && !charterHasCommand(t, words[1]) {
			t.Errorf("%s: %q: charter has no command %s", resource, cmd, words[1])
		}
	default:
		t.Errorf("%s: %q runs %s, which neither exists nor is built by its resource_deps", resource, cmd, program)
	}
}

// checkCoversSources checks that paths cover every folder holding a Go
// package charter is built from, and go.mod and go.sum: Tilt rebuilds
// only on changes under them.
func checkCoversSources(t *testing.T, what string, paths []string) {
	t.Helper()
	list := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/charter")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/charter: %v", err)
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"go.mod", "go.sum"}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(absRoot, dir)
		if err != nil {
			t.Fatal(err)
		}
		if top := strings.Split(filepath.ToSlash(rel), "/")[0]; !slices.Contains(want, top) {
			want = append(want, top)
		}
	}
	for _, w := range want {
		if !slices.Contains(paths, w) {
			t.Errorf("%s lacks %s, which charter is built from: Tilt would not rebuild when it changes", what, w)
		}
	}
}

// makeTargets maps each target the Makefile defines to its recipe.
func makeTargets(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`^([A-Za-z0-9_.$()/-]+)\s*:([^=]|$)`)
	targets := map[string]string{}
	var current string
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		line := scanner.Text()
		if m := rule.FindStringSubmatch(line); m != nil {
			current = m[1]
			targets[current] += ""
		} else if strings.HasPrefix(line, "\t") && current != "" {
			targets[current] += line + "\n"
		} else if !strings.HasPrefix(line, "#") {
			current = ""
		}
	}
	return targets
}

// outputs lists the bin/ files the make targets of cmd write (-o $(BIN)/x).
func outputs(t *testing.T, cmd string, targets map[string]string) []string {
	t.Helper()
	words := strings.Fields(cmd)
	if len(words) == 0 || words[0] != "make" {
		return nil
	}
	out := regexp.MustCompile(`-o \$\(BIN\)/(\S+)`)
	var files []string
	for _, target := range words[1:] {
		for _, m := range out.FindAllStringSubmatch(targets[target], -1) {
			files = append(files, "bin/"+m[1])
		}
	}
	return files
}

// charterHasCommand reports whether cmd/charter defines the command name.
func charterHasCommand(t *testing.T, name string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "cmd", "charter", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	use := regexp.MustCompile(`Use:\s+"` + regexp.QuoteMeta(name) + `[ "]`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if use.Match(data) {
			return true
		}
	}
	return false
}

// workloads lists the workloads in a multi-document YAML and the images
// their Pod templates run. A stream of none must at least hold objects.
func workloads(stream []byte) ([]workload, []string, error) {
	objects := 0
	var found []workload
	var images []string
	for _, doc := range bytes.Split(stream, []byte("\n---\n")) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, nil, fmt.Errorf("k8s_yaml: %w", err)
		}
		if obj.GetKind() != "" {
			objects++
		}
		template := []string{"spec", "template", "spec"}
		switch obj.GetKind() {
		case "Deployment", "StatefulSet", "DaemonSet", "Job":
		case "CronJob":
			template = []string{"spec", "jobTemplate", "spec", "template", "spec"}
		default:
			continue
		}
		found = append(found, workload{kind: obj.GetKind(), name: obj.GetName()})
		containers, _, _ := unstructured.NestedSlice(obj.Object, append(template, "containers")...)
		for _, c := range containers {
			if image, ok := c.(map[string]any)["image"].(string); ok {
				images = append(images, image)
			}
		}
	}
	if objects == 0 {
		return nil, nil, fmt.Errorf("k8s_yaml: no object in what it was given")
	}
	return found, images, nil
}

// imageName is an image reference without its tag or digest.
func imageName(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

func exists(path string) bool {
	_, err := os.Stat(filepath.Join(root, path))
	return err == nil
}

func stringList(l *starlark.List) []string {
	if l == nil {
		return nil
	}
	var out []string
	for i := range l.Len() {
		if s, ok := starlark.AsString(l.Index(i)); ok {
			out = append(out, s)
		}
	}
	return out
}
