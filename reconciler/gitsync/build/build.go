// Package build renders a folder of a checked-out repository into the
// objects it declares, with kustomize.
//
// The repository is copied into an in-memory file system first, so a
// kustomization can reach any file of the repository (overlays list policy
// files from ../../policies) but nothing outside it: no controller files, no
// mounted service-account tokens. A folder of plain YAML (no kustomization
// in it or below it) is decoded file by file instead, straight from the
// checkout; one with kustomized sub-folders is built from a kustomization
// generated in memory that lists its YAML files and those sub-folders.
// Every object comes back with the repository file it was declared in.
package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// originAnnotation is where kustomize records the file an object came from
// when buildMetadata asks for originAnnotations.
const originAnnotation = "config.kubernetes.io/origin"

// maxFileSize is the largest file copied into the build's file system.
const maxFileSize = 4 << 20

// kustomizationNames are the file names kustomize recognises, in its order.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Object is one rendered object and the repository file that declared it
// (slash-separated, relative to the repository root).
type Object struct {
	*unstructured.Unstructured
	File string
}

// Error is a failed build; Path names the folder.
type Error struct {
	Path string
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("kustomize build %s: %v", e.Path, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Build renders dir (slash-separated, relative to root; "" or "." for the
// root) of the repository checked out at root, within ctx: kustomize takes
// no context, so the build runs on a goroutine of its own and Build
// returns ctx's error when ctx ends first. A kustomization that names
// anything remote is refused before kustomize runs (*RemoteError), so the
// build itself reads nothing but the repository's files.
func Build(ctx context.Context, root, dir string) ([]Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		objs []Object
		err  error
	}
	done := make(chan result, 1)
	go func() {
		objs, err := build(root, dir)
		done <- result{objs, err}
	}()
	select {
	case r := <-done:
		return r.objs, r.err
	case <-ctx.Done():
		return nil, &Error{Path: strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(dir)), "/"), Err: fmt.Errorf("not done in time: %w", context.Cause(ctx))}
	}
}

func build(root, dir string) ([]Object, error) {
	dir = path.Clean("/" + strings.TrimPrefix(filepath.ToSlash(dir), "./"))
	if objs, ok, err := buildPlain(root, dir); ok {
		if err != nil {
			return nil, &Error{Path: strings.TrimPrefix(dir, "/"), Err: err}
		}
		return objs, nil
	}
	return buildKustomize(root, dir)
}

// buildKustomize renders dir (slash-separated, absolute in the repository)
// with kustomize over an in-memory copy of the repository.
func buildKustomize(root, dir string) ([]Object, error) {
	fsys, err := loadRepository(root)
	if err != nil {
		return nil, &Error{Path: dir, Err: err}
	}
	if !fsys.IsDir(dir) {
		return nil, &Error{Path: strings.TrimPrefix(dir, "/"), Err: errors.New("no such folder in the repository")}
	}
	if err := prepareKustomization(fsys, dir); err != nil {
		return nil, &Error{Path: strings.TrimPrefix(dir, "/"), Err: err}
	}
	if err := checkLocal(fsys, dir); err != nil {
		return nil, &Error{Path: strings.TrimPrefix(dir, "/"), Err: err}
	}
	opts := krusty.MakeDefaultOptions()
	// The in-memory copy is the boundary; inside it, overlays may list
	// files of sibling folders.
	opts.LoadRestrictions = kustypes.LoadRestrictionsNone
	resources, err := krusty.MakeKustomizer(opts).Run(fsys, dir)
	if err != nil {
		return nil, &Error{Path: strings.TrimPrefix(dir, "/"), Err: err}
	}
	objects := make([]Object, 0, resources.Size())
	for _, r := range resources.Resources() {
		// Through JSON rather than r.Map(): kyaml's maps hold Go ints,
		// which unstructured's DeepCopy (and so every client call)
		// rejects; JSON gives the int64s and float64s it expects.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, &Error{Path: strings.TrimPrefix(dir, "/"), Err: err}
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, &Error{Path: strings.TrimPrefix(dir, "/"), Err: err}
		}
		objects = append(objects, Object{Unstructured: u, File: takeOrigin(u, dir)})
	}
	return objects, nil
}

// takeOrigin removes the origin annotation and returns the file it names,
// relative to the repository root.
func takeOrigin(u *unstructured.Unstructured, dir string) string {
	ann := u.GetAnnotations()
	raw, ok := ann[originAnnotation]
	if !ok {
		return ""
	}
	delete(ann, originAnnotation)
	if len(ann) == 0 {
		ann = nil
	}
	u.SetAnnotations(ann)
	var origin struct {
		Path string `json:"path"`
	}
	if err := yaml.Unmarshal([]byte(raw), &origin); err != nil || origin.Path == "" {
		return ""
	}
	return strings.TrimPrefix(path.Join(dir, origin.Path), "/")
}

// loadRepository copies the repository's files, without .git, into memory.
func loadRepository(root string) (filesys.FileSystem, error) {
	fsys := filesys.MakeFsInMemory()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := "/" + filepath.ToSlash(rel)
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir():
			return fsys.MkdirAll(path.Clean(name))
		case !d.Type().IsRegular():
			// Symlinks could point out of the repository.
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > maxFileSize {
			// Binaries and other large files are no manifests; leaving them
			// on disk keeps the memory a build takes near the repository's
			// YAML.
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fsys.WriteFile(name, data)
	})
	return fsys, err
}

// prepareKustomization makes dir's kustomization record origins, generating
// one for a plain folder of YAML.
func prepareKustomization(fsys filesys.FileSystem, dir string) error {
	for _, name := range kustomizationNames {
		file := path.Join(dir, name)
		if !fsys.Exists(file) {
			continue
		}
		data, err := fsys.ReadFile(file)
		if err != nil {
			return err
		}
		var k map[string]any
		if err := yaml.Unmarshal(data, &k); err != nil {
			return fmt.Errorf("%s: %w", strings.TrimPrefix(file, "/"), err)
		}
		if k == nil {
			k = map[string]any{}
		}
		k["buildMetadata"] = appendOnce(k["buildMetadata"], kustypes.OriginAnnotations)
		out, err := yaml.Marshal(k)
		if err != nil {
			return err
		}
		return fsys.WriteFile(file, out)
	}
	resources, err := plainResources(fsys, dir)
	if err != nil {
		return err
	}
	k := kustypes.Kustomization{
		TypeMeta:      kustypes.TypeMeta{APIVersion: kustypes.KustomizationVersion, Kind: kustypes.KustomizationKind},
		Resources:     resources,
		BuildMetadata: []string{kustypes.OriginAnnotations},
	}
	out, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	return fsys.WriteFile(path.Join(dir, kustomizationNames[0]), out)
}

func appendOnce(list any, value string) []any {
	items, _ := list.([]any)
	for _, it := range items {
		if it == value {
			return items
		}
	}
	return append(items, value)
}

// plainResources lists the manifests under dir for a generated
// kustomization: YAML and JSON files, and sub-folders that have their own
// kustomization. Hidden files and folders are skipped, and so are Kyverno
// CLI test suites (kyverno-test.yaml) with the resource and variable files
// they name: those are test fixtures, not objects to apply.
func plainResources(fsys filesys.FileSystem, dir string) ([]string, error) {
	skip := map[string]bool{}
	var files, kustomized []string
	err := fsys.Walk(dir, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(info.Name(), ".") {
			if info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if info.IsDir() {
			if p != dir && hasKustomization(fsys, p) {
				kustomized = append(kustomized, p)
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(path.Ext(p)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		if info.Name() == "kyverno-test.yaml" || info.Name() == "kyverno-test.yml" {
			skip[p] = true
			fixtures, err := testFixtures(fsys, p)
			if err != nil {
				return err
			}
			for _, f := range fixtures {
				skip[f] = true
			}
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var resources []string
	for _, f := range append(files, kustomized...) {
		if skip[f] {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(f, dir), "/")
		resources = append(resources, rel)
	}
	sort.Strings(resources)
	return resources, nil
}

func hasKustomization(fsys filesys.FileSystem, dir string) bool {
	for _, name := range kustomizationNames {
		if fsys.Exists(path.Join(dir, name)) {
			return true
		}
	}
	return false
}

// testFixtures returns the files a Kyverno CLI test names as resources,
// variables or user info, as absolute paths in fsys.
func testFixtures(fsys filesys.FileSystem, testFile string) ([]string, error) {
	data, err := fsys.ReadFile(testFile)
	if err != nil {
		return nil, err
	}
	var suite struct {
		Resources []string `json:"resources"`
		Variables string   `json:"variables"`
		Userinfo  string   `json:"userinfo"`
	}
	// A test file that does not parse is not ours to judge here; only its
	// fixtures are unknown, so nothing is skipped.
	if err := yaml.Unmarshal(data, &suite); err != nil {
		return nil, nil
	}
	base := path.Dir(testFile)
	var out []string
	for _, f := range append(suite.Resources, suite.Variables, suite.Userinfo) {
		if f != "" && !strings.Contains(f, "://") {
			out = append(out, path.Join(base, f))
		}
	}
	return out, nil
}
