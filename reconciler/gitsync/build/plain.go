package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// buildPlain renders a folder of plain YAML (no kustomization in it or
// below it) by decoding its files directly, the objects kustomize would
// render from a generated kustomization listing the same files. It reads
// only that folder, one file at a time: a repository of hundreds of
// policies is not copied into memory, nor through kustomize's resource
// map, which made a sync of 500 policies take three times the memory.
//
// ok is false when the folder needs kustomize after all (a sub-folder has
// its own kustomization).
func buildPlain(root, dir string) (objs []Object, ok bool, err error) {
	abs := filepath.Join(root, filepath.FromSlash(dir))
	// Only a real folder of the checkout, reached through no symbolic
	// link; anything else goes through the in-memory copy, which has no
	// links at all.
	if info, err := os.Lstat(abs); err != nil || !info.IsDir() {
		return nil, false, nil
	}
	realRoot, err1 := filepath.EvalSymlinks(root)
	realDir, err2 := filepath.EvalSymlinks(abs)
	if err1 != nil || err2 != nil || filepath.Join(realRoot, filepath.FromSlash(dir)) != realDir {
		return nil, false, nil
	}
	fsys := filesys.MakeFsOnDisk()
	if hasKustomization(fsys, abs) {
		return nil, false, nil
	}
	files, kustomized, err := listPlain(fsys, abs)
	if err != nil || len(kustomized) > 0 {
		return nil, false, err
	}
	seen := map[string]string{}
	for _, f := range files {
		rel := strings.TrimPrefix(path.Join(strings.TrimPrefix(dir, "/"), filepath.ToSlash(strings.TrimPrefix(f, abs))), "/")
		if info, err := os.Stat(f); err != nil {
			return nil, true, err
		} else if info.Size() > maxFileSize {
			// Refused, not skipped: a manifest left out would apply the
			// revision without its objects and say nothing (#31 bad input).
			return nil, true, fmt.Errorf("%s: a manifest of %d bytes, over the %d a manifest file may hold", rel, info.Size(), maxFileSize)
		}
		decoded, err := decodeFile(f, rel)
		if err != nil {
			return nil, true, err
		}
		for _, o := range decoded {
			id := identity(o.Unstructured)
			if first, dup := seen[id]; dup {
				return nil, true, fmt.Errorf("%s: %s is declared twice (first in %s)", rel, id, first)
			}
			seen[id] = rel
			objs = append(objs, o)
		}
	}
	return objs, true, nil
}

// decodeFile decodes every document of a YAML or JSON file; a List's items
// become objects of their own, as kustomize makes them.
func decodeFile(name, rel string) ([]Object, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var objs []Object
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		// YAML 1.2 as kustomize reads it (yes/no/on/off stay strings).
		var v any
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", rel, doc, err)
		}
		if v == nil {
			continue
		}
		if _, isMap := v.(map[string]any); !isMap {
			return nil, fmt.Errorf("%s: document %d is not an object", rel, doc)
		}
		// Through JSON, so numbers are int64 and float64 as unstructured
		// expects.
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", rel, doc, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", rel, doc, err)
		}
		if !u.IsList() {
			objs = append(objs, Object{Unstructured: u, File: rel})
			continue
		}
		list, err := u.ToList()
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", rel, doc, err)
		}
		for i := range list.Items {
			objs = append(objs, Object{Unstructured: &list.Items[i], File: rel})
		}
	}
}

// identity is what kustomize refuses to see twice: group, kind, namespace
// and name.
func identity(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	id := gvk.Kind + "." + gvk.Group + " "
	if ns := u.GetNamespace(); ns != "" {
		id += ns + "/"
	}
	return id + u.GetName()
}

// listPlain lists the manifests under dir as plainResources does, as
// absolute paths, and the sub-folders with a kustomization. Only regular
// files count: a symbolic link may point out of the repository. Files of
// any size are listed: buildPlain refuses one too large.
func listPlain(fsys filesys.FileSystem, dir string) (files, kustomized []string, err error) {
	resources, err := plainResources(fsys, dir)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range resources {
		p := filepath.Join(dir, filepath.FromSlash(r))
		info, err := os.Lstat(p)
		switch {
		case err != nil:
			return nil, nil, err
		case info.IsDir():
			kustomized = append(kustomized, p)
		case info.Mode().IsRegular():
			files = append(files, p)
		}
	}
	return files, kustomized, nil
}
