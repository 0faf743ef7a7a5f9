package build

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// RemoteError is a path of a kustomization (or of a generator or
// transformer configuration it lists) that kustomize would fetch over the
// network: an http(s) file, which its file loader GETs with no timeout and
// no size bound, or a Git repository, which it clones. A build reads only
// the repository it was given, so such a path is refused before the build
// starts; the message names the file and the field.
type RemoteError struct {
	// File is the kustomization or configuration file, relative to the
	// repository root.
	File string
	// Field is where in it, e.g. "configMapGenerator[0].files[0]".
	Field string
	Value string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("%s: %s: %q is remote: a build reads only files of the repository, never the network", e.File, e.Field, e.Value)
}

// scpUser is the user@ that makes kustomize read a path as a Git remote
// in scp form (git@github.com:org/repo).
var scpUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// isRemote reports whether kustomize would read p from the network: a URL
// of any scheme, its git:: prefix, an scp-style Git remote, or a
// github.com path, which it clones. It errs on the side of remote: a local
// file named like one is refused, never fetched.
func isRemote(p string) bool {
	p = strings.TrimSpace(p)
	lower := strings.ToLower(p)
	if strings.Contains(p, "://") || strings.HasPrefix(lower, "git::") || scpUser.MatchString(p) ||
		strings.HasPrefix(lower, "github.com/") || strings.HasPrefix(lower, "github.com:") {
		return true
	}
	u, err := url.Parse(p)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https")
}

// checkLocal refuses a build of dir (absolute in fsys) whose
// kustomizations name anything remote. It follows the kustomizations dir
// reaches through resources, bases, components, generators, transformers
// and validators, and reads the generator and transformer configurations
// they list, as kustomize would; it reads nothing kustomize would not.
func checkLocal(fsys filesys.FileSystem, dir string) error {
	c := &localCheck{fsys: fsys, seen: map[string]bool{}}
	return c.kustomization(dir)
}

type localCheck struct {
	fsys filesys.FileSystem
	seen map[string]bool
}

func (c *localCheck) kustomization(dir string) error {
	if c.seen[dir] {
		return nil
	}
	c.seen[dir] = true
	file := ""
	for _, name := range kustomizationNames {
		if f := path.Join(dir, name); c.fsys.Exists(f) {
			file = f
			break
		}
	}
	if file == "" {
		// Not a kustomization: kustomize reads it as a resource file, or
		// fails on its own.
		return nil
	}
	data, err := c.fsys.ReadFile(file)
	if err != nil {
		return err
	}
	var k kustypes.Kustomization
	if err := sigsyaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("%s: %w", strings.TrimPrefix(file, "/"), err)
	}
	rel := strings.TrimPrefix(file, "/")
	remote := func(field, value string) error {
		if isRemote(value) {
			return &RemoteError{File: rel, Field: field, Value: value}
		}
		return nil
	}
	// Roots: kustomizations of their own, followed.
	//nolint:staticcheck // bases is deprecated, and still read by kustomize.
	for _, f := range []namedList{{"resources", k.Resources}, {"bases", k.Bases}, {"components", k.Components}} {
		field, list := f.name, f.list
		for i, v := range list {
			if err := remote(fmt.Sprintf("%s[%d]", field, i), v); err != nil {
				return err
			}
			if p := path.Join(dir, v); c.fsys.IsDir(p) {
				if err := c.kustomization(p); err != nil {
					return err
				}
			}
		}
	}
	// Plugin configurations: files, folders or inline YAML.
	for _, f := range []namedList{{"generators", k.Generators}, {"transformers", k.Transformers}, {"validators", k.Validators}} {
		field, list := f.name, f.list
		for i, v := range list {
			at := fmt.Sprintf("%s[%d]", field, i)
			if strings.Contains(v, "\n") {
				if err := checkPluginConfigs(rel, at, []byte(v)); err != nil {
					return err
				}
				continue
			}
			if err := remote(at, v); err != nil {
				return err
			}
			switch p := path.Join(dir, v); {
			case c.fsys.IsDir(p):
				if err := c.kustomization(p); err != nil {
					return err
				}
			case c.fsys.Exists(p):
				data, err := c.fsys.ReadFile(p)
				if err != nil {
					return err
				}
				if err := checkPluginConfigs(strings.TrimPrefix(p, "/"), "", data); err != nil {
					return err
				}
			}
		}
	}
	// Files.
	for _, f := range []namedList{{"crds", k.Crds}, {"configurations", k.Configurations}} {
		field, list := f.name, f.list
		for i, v := range list {
			if err := remote(fmt.Sprintf("%s[%d]", field, i), v); err != nil {
				return err
			}
		}
	}
	//nolint:staticcheck // patchesStrategicMerge is deprecated, and still read by kustomize.
	for i, v := range k.PatchesStrategicMerge {
		if !strings.Contains(string(v), "\n") {
			if err := remote(fmt.Sprintf("patchesStrategicMerge[%d]", i), string(v)); err != nil {
				return err
			}
		}
	}
	//nolint:staticcheck // patchesJson6902 is deprecated, and still read by kustomize.
	for _, f := range []struct {
		name string
		list []kustypes.Patch
	}{{"patches", k.Patches}, {"patchesJson6902", k.PatchesJson6902}} {
		field, list := f.name, f.list
		for i, p := range list {
			if err := remote(fmt.Sprintf("%s[%d].path", field, i), p.Path); err != nil {
				return err
			}
		}
	}
	for i, r := range k.Replacements {
		if err := remote(fmt.Sprintf("replacements[%d].path", i), r.Path); err != nil {
			return err
		}
	}
	if p, ok := k.OpenAPI["path"]; ok {
		if err := remote("openapi.path", p); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		gens []kustypes.GeneratorArgs
	}{{"configMapGenerator", configMapArgs(k.ConfigMapGenerator)}, {"secretGenerator", secretArgs(k.SecretGenerator)}} {
		field, gens := f.name, f.gens
		for i, g := range gens {
			for j, f := range g.FileSources {
				if err := remote(fmt.Sprintf("%s[%d].files[%d]", field, i, j), f); err != nil {
					return err
				}
			}
			for j, f := range g.EnvSources {
				if err := remote(fmt.Sprintf("%s[%d].envs[%d]", field, i, j), f); err != nil {
					return err
				}
			}
			if err := remote(fmt.Sprintf("%s[%d].env", field, i), g.EnvSource); err != nil {
				return err
			}
		}
	}
	return nil
}

// namedList is a list field of a kustomization, by name.
type namedList struct {
	name string
	list []string
}

func configMapArgs(in []kustypes.ConfigMapArgs) []kustypes.GeneratorArgs {
	out := make([]kustypes.GeneratorArgs, len(in))
	for i := range in {
		out[i] = in[i].GeneratorArgs
	}
	return out
}

func secretArgs(in []kustypes.SecretArgs) []kustypes.GeneratorArgs {
	out := make([]kustypes.GeneratorArgs, len(in))
	for i := range in {
		out[i] = in[i].GeneratorArgs
	}
	return out
}

// pluginPathKeys are the fields of kustomize's builtin generator and
// transformer configurations that name files to load (PatchTransformer
// path, ConfigMapGenerator files and envs, ReplacementTransformer
// replacements[].path, ...).
var pluginPathKeys = map[string]bool{
	"path": true, "paths": true, "files": true, "envs": true, "env": true,
	"valuesFile": true, "additionalValuesFiles": true,
}

// checkPluginConfigs refuses a remote path in any document of a generator
// or transformer configuration, at any depth.
func checkPluginConfigs(file, prefix string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 0; ; doc++ {
		var v any
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			// kustomize refuses it too, fetching nothing.
			return nil
		}
		at := prefix
		if at == "" {
			at = fmt.Sprintf("document %d", doc+1)
		}
		if err := walkPluginConfig(file, at, v, false); err != nil {
			return err
		}
	}
}

func walkPluginConfig(file, at string, v any, pathValue bool) error {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := walkPluginConfig(file, at+"."+k, v[k], pluginPathKeys[k]); err != nil {
				return err
			}
		}
	case []any:
		for i, item := range v {
			if err := walkPluginConfig(file, fmt.Sprintf("%s[%d]", at, i), item, pathValue); err != nil {
				return err
			}
		}
	case string:
		if pathValue && isRemote(v) {
			return &RemoteError{File: file, Field: at, Value: v}
		}
	}
	return nil
}
