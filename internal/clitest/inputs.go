package clitest

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// fileCache reads and decodes each file once however many suites that run
// at the same time name it: in a policy library, many suites share policy
// files. Decoded values are shared between suites and must be treated as
// read-only. What no running suite holds any more is collected.
type fileCache struct {
	entries *weakMap[cacheEntry]
	// held, in a suite's view (forSuite), keeps what the suite read.
	held *[]*cacheEntry
	// root, when set, is the folder every file read must lie in, symbolic
	// links resolved (Options.Root).
	root string
}

type cacheEntry struct {
	once  sync.Once
	value any
	err   error
}

func newFileCache() *fileCache { return &fileCache{entries: &weakMap[cacheEntry]{}} }

// forSuite returns a view of the cache that keeps every file it reads
// until the view is dropped with the suite's inputs.
func (c *fileCache) forSuite() *fileCache {
	view := *c
	view.held = new([]*cacheEntry)
	return &view
}

// get returns decode(path)'s result, computing it once per (what, path).
func (c *fileCache) get(what, path string, decode func(string) (any, error)) (any, error) {
	e := c.entries.get(what + "\x00" + path)
	if c.held != nil {
		*c.held = append(*c.held, e)
	}
	e.once.Do(func() {
		if e.err = c.within(path); e.err == nil {
			e.value, e.err = decode(path)
		}
	})
	return e.value, e.err
}

// within refuses a path outside the cache's root, symbolic links resolved.
func (c *fileCache) within(path string) error {
	if c.root == "" {
		return nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(c.root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s: outside %s, which the run may read", path, c.root)
	}
	return nil
}

func decodePolicyFile(path string) (any, error) {
	docs, err := manifest.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return manifest.DecodePolicies(docs)
}

func decodeObjectFile(path string) (any, error) {
	docs, err := manifest.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := manifest.Objects(docs)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		manifest.DefaultNamespace(o)
	}
	return objs, nil
}

func decodeValuesFile(path string) (any, error) {
	d, err := singleDocument(path)
	if err != nil {
		return nil, err
	}
	// Kyverno's CLI does not check a values file's kind: both spellings
	// appear in real suites.
	if apiVersion, kind := d.TypeMeta(); kind == "Value" {
		if err := checkSchema(d, apiVersion, "Values", "Values"); err != nil {
			return nil, err
		}
	} else if err := checkSchema(d, apiVersion, kind, "Values"); err != nil {
		return nil, err
	}
	var v Values
	if err := decodeStrict(d, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Where(), err)
	}
	return &v.ValuesSpec, nil
}

func decodeUserInfoFile(path string) (any, error) {
	d, err := singleDocument(path)
	if err != nil {
		return nil, err
	}
	if err := checkDocSchema(d, "UserInfo"); err != nil {
		return nil, err
	}
	var u UserInfo
	if err := decodeStrict(d, &u); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Where(), err)
	}
	return &u, nil
}

// decodeClusterResourceFile reads a clusterResources file: ClusterResource
// documents (whose spec.resources are the objects) or plain objects.
func decodeClusterResourceFile(path string) (any, error) {
	docs, err := manifest.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		apiVersion, kind := d.TypeMeta()
		if kind != "ClusterResource" || !strings.HasPrefix(apiVersion, "cli.kyverno.io/") {
			more, err := manifest.Objects([]manifest.Document{d})
			if err != nil {
				return nil, err
			}
			objs = append(objs, more...)
			continue
		}
		var cr ClusterResource
		if err := decodeStrict(d, &cr); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Where(), err)
		}
		for i, r := range cr.Spec.Resources {
			u := &unstructured.Unstructured{Object: r}
			if u.GetAPIVersion() == "" || u.GetKind() == "" {
				return nil, fmt.Errorf("%s: spec.resources[%d]: missing apiVersion or kind", d.Where(), i)
			}
			objs = append(objs, u)
		}
	}
	for _, o := range objs {
		manifest.DefaultNamespace(o)
	}
	return objs, nil
}

func singleDocument(path string) (manifest.Document, error) {
	docs, err := manifest.ReadFile(path)
	if err != nil {
		return manifest.Document{}, err
	}
	if len(docs) != 1 {
		return manifest.Document{}, fmt.Errorf("%s: want exactly one document, found %d", path, len(docs))
	}
	return docs[0], nil
}

// inputs is everything a suite's Test points at, read and decoded.
type inputs struct {
	// files keeps the files read for the suite shared while it runs.
	files      *fileCache
	policies   []kyvernov1.PolicyInterface
	exceptions []*kyvernov2.PolicyException
	// celExceptions are policies.kyverno.io PolicyExceptions.
	celExceptions []*policiesv1.PolicyException
	unsupported   map[string]string
	// celContext serves the CEL policies' resource and image libraries.
	celContext *celContext
	// policyFiles are the resolved policy and exception paths, the identity
	// of the compiled set.
	policyFiles []string
	resources   []*unstructured.Unstructured
	values      *suiteValues
	namespaces  namespaceLabels
	user        *UserInfo
	cluster     *fakeCluster
	specs       []*ValuesSpec
	warnings    []string
	// expected and existing serve mutate and generate rules (patched.go).
	expected *expectations
	existing *objectSet
}

// loadInputs reads the files a suite names, relative to its directory.
// Errors name the Test field and the file.
func loadInputs(s *Suite, cache *fileCache) (*inputs, error) {
	t := s.Test
	cache = cache.forSuite()
	in := &inputs{files: cache}
	resolve := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(s.Dir, p)
	}
	declared := manifest.Declared{}
	for i, p := range t.Policies {
		if strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://") {
			return nil, fmt.Errorf("policies[%d]: %s: remote policies are not supported", i, p)
		}
		path := resolve(p)
		v, err := cache.get("policy", path, decodePolicyFile)
		if err != nil {
			return nil, fmt.Errorf("policies[%d]: %w", i, err)
		}
		pf := v.(*manifest.Policies)
		if err := declared.Add(path, pf.Policies...); err != nil {
			return nil, fmt.Errorf("policies[%d]: %w", i, err)
		}
		in.policyFiles = append(in.policyFiles, path)
		for _, other := range pf.Others {
			in.warnings = append(in.warnings, fmt.Sprintf("policies[%d]: %s is not a policy, ignored", i, other))
		}
		in.policies = append(in.policies, pf.Policies...)
		in.exceptions = append(in.exceptions, pf.Exceptions...)
		in.celExceptions = append(in.celExceptions, pf.CELExceptions...)
		for name, kind := range pf.Unsupported {
			if in.unsupported == nil {
				in.unsupported = map[string]string{}
			}
			in.unsupported[name] = kind
		}
	}
	for i, p := range t.Exceptions {
		path := resolve(p)
		v, err := cache.get("policy", path, decodePolicyFile)
		if err != nil {
			return nil, fmt.Errorf("exceptions[%d]: %w", i, err)
		}
		pf := v.(*manifest.Policies)
		if len(pf.Policies) > 0 {
			return nil, fmt.Errorf("exceptions[%d]: %s: holds policies, not PolicyExceptions", i, path)
		}
		in.policyFiles = append(in.policyFiles, "exception:"+path)
		in.exceptions = append(in.exceptions, pf.Exceptions...)
		in.celExceptions = append(in.celExceptions, pf.CELExceptions...)
	}

	seen := map[resourceKey]bool{}
	for i, p := range t.Resources {
		if strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://") {
			return nil, fmt.Errorf("resources[%d]: %s: remote resources are not supported", i, p)
		}
		v, err := cache.get("objects", resolve(p), decodeObjectFile)
		if err != nil {
			return nil, fmt.Errorf("resources[%d]: %w", i, err)
		}
		for _, o := range v.([]*unstructured.Unstructured) {
			k := keyOf(o)
			if seen[k] {
				in.warnings = append(in.warnings, fmt.Sprintf("resources[%d]: duplicate resource %s dropped", i, k))
				continue
			}
			seen[k] = true
			in.resources = append(in.resources, o)
		}
	}

	if t.Variables != "" {
		v, err := cache.get("values", resolve(t.Variables), decodeValuesFile)
		if err != nil {
			return nil, fmt.Errorf("variables: %w", err)
		}
		in.specs = append(in.specs, v.(*ValuesSpec))
	}
	if t.Values != nil {
		in.specs = append(in.specs, t.Values)
	}
	in.values = newSuiteValues(in.specs...)
	in.namespaces = newNamespaceLabels(in.specs...)

	if t.UserInfo != "" {
		v, err := cache.get("userinfo", resolve(t.UserInfo), decodeUserInfoFile)
		if err != nil {
			return nil, fmt.Errorf("userinfo: %w", err)
		}
		in.user = v.(*UserInfo)
	}

	in.cluster = &fakeCluster{responses: t.APICallResponses}
	for i, p := range t.ClusterResources {
		v, err := cache.get("cluster", resolve(p), decodeClusterResourceFile)
		if err != nil {
			return nil, fmt.Errorf("clusterResources[%d]: %w", i, err)
		}
		for _, o := range v.([]*unstructured.Unstructured) {
			in.cluster.objects = append(in.cluster.objects, o)
			if o.GetKind() == "Namespace" && o.GetAPIVersion() == "v1" {
				if _, set := in.namespaces[o.GetName()]; !set {
					in.namespaces[o.GetName()] = o.GetLabels()
				}
			}
		}
	}
	in.celContext = &celContext{}
	if t.Context != "" {
		v, err := cache.get("context", resolve(t.Context), decodeContextFile)
		if err != nil {
			return nil, fmt.Errorf("context: %w", err)
		}
		in.celContext = v.(*celContext)
	}
	if len(in.cluster.objects) > 0 {
		// With clusterResources the CEL libraries read those, not the
		// context file's resources, as in Kyverno's CLI.
		in.celContext = &celContext{objects: in.cluster.objects, images: in.celContext.images}
	}
	in.expected = loadExpectations(s, cache)
	existing, err := existingObjects(s, cache, in)
	if err != nil {
		return nil, fmt.Errorf("targetResources, paramResources or cloneSourceResource: %w", err)
	}
	in.existing = existing
	if len(t.GlobalContextEntries) > 0 {
		in.cluster.global = map[string]any{}
		for i, g := range t.GlobalContextEntries {
			data, err := globalEntryData(g, resolve, cache)
			if err != nil {
				return nil, fmt.Errorf("globalContextEntries[%d] (%s): %w", i, g.Name, err)
			}
			in.cluster.global[g.Name] = data
			// A projection is also read as "<entry>.<projection>", as
			// in the cluster.
			if values, ok := data.(map[string]any); ok && len(g.Projections) > 0 {
				for _, p := range g.Projections {
					in.cluster.global[g.Name+"."+p.Name] = values[p.Name]
				}
			}
		}
	}
	return in, nil
}

// globalEntryData is the data a mocked GlobalContextEntry serves: its
// data, resources or resourceFiles, narrowed by fieldPath (JMESPath) and,
// with projections, the map of each projection's name to its JMESPath
// result over that.
func globalEntryData(g GlobalContextEntry, resolve func(string) string, cache *fileCache) (any, error) {
	var root any
	switch {
	case g.Data != nil:
		root = g.Data
	case len(g.Resources) > 0:
		root = g.Resources
	case len(g.ResourceFiles) > 0:
		var items []any
		for _, p := range g.ResourceFiles {
			v, err := cache.get("objects", resolve(p), decodeObjectFile)
			if err != nil {
				return nil, err
			}
			for _, o := range v.([]*unstructured.Unstructured) {
				items = append(items, o.Object)
			}
		}
		root = items
	default:
		return nil, fmt.Errorf("one of data, resources or resourceFiles is required")
	}
	if g.FieldPath == "" && len(g.Projections) == 0 {
		return root, nil
	}
	jp := jmespath.New()
	if g.FieldPath != "" {
		v, err := jp.Search(g.FieldPath, root)
		if err != nil {
			return nil, fmt.Errorf("fieldPath %q: %w", g.FieldPath, err)
		}
		root = v
	}
	if len(g.Projections) == 0 {
		return root, nil
	}
	out := make(map[string]any, len(g.Projections))
	for i, p := range g.Projections {
		expr := p.expression()
		if p.Name == "" || expr == "" {
			return nil, fmt.Errorf("projections[%d]: name and jmesPath are required", i)
		}
		v, err := jp.Search(expr, root)
		if err != nil {
			return nil, fmt.Errorf("projections[%d] (%s): %q: %w", i, p.Name, expr, err)
		}
		out[p.Name] = v
	}
	return out, nil
}

func keyOf(o *unstructured.Unstructured) resourceKey {
	return resourceKey{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}
