package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// FieldManager is the server-side apply field manager of the objects the
// harness installs.
const FieldManager = "charter-harness"

// crdEstablishTimeout bounds the wait for installed CRDs to be served. The
// CRDs serve up to three versions each (Kyverno's), and on 2 cores shared
// with other builds the API server took longer than 30 s to establish them
// all, and at load 30 (a CI run beside other engineers' tests) not even
// within two minutes: five minutes is a bound on a wedged server, not a
// performance target.
const crdEstablishTimeout = 5 * time.Minute

// ReadCRDs reads every CustomResourceDefinition in the given files and
// folders (a folder's *.yaml, *.yml and *.json files, not its subfolders;
// multi-document YAML allowed). Other kinds are an error: a CRD folder holding
// something else is a mistake worth hearing about.
func ReadCRDs(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading CRDs: %w", err)
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("reading CRDs: %w", err)
		}
		for _, e := range entries {
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		}
	}
	sort.Strings(files)

	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, file := range files {
		fileCRDs, err := readCRDFile(file)
		if err != nil {
			return nil, err
		}
		crds = append(crds, fileCRDs...)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition found in %s", strings.Join(paths, ", "))
	}
	return crds, nil
}

func readCRDFile(file string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading CRDs: %w", err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var crds []*apiextensionsv1.CustomResourceDefinition
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		if meta.APIVersion == "" && meta.Kind == "" {
			continue // a document holding only comments
		}
		if meta.APIVersion != apiextensionsv1.SchemeGroupVersion.String() || meta.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: document %d: expected an %s CustomResourceDefinition, found %s %s",
				file, doc, apiextensionsv1.SchemeGroupVersion, meta.APIVersion, meta.Kind)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		crds = append(crds, crd)
	}
}

// InstallCRDs server-side applies the CRDs read from paths (see ReadCRDs)
// and waits until the API server serves every one of them (conditions
// Established and NamesAccepted true). It works against any cluster.
func InstallCRDs(ctx context.Context, cfg *rest.Config, paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := ReadCRDs(paths...)
	if err != nil {
		return nil, err
	}
	return crds, ApplyCRDs(ctx, cfg, crds)
}

// ApplyCRDs is InstallCRDs for CRDs already read (ReadCRDs), for a caller
// that installs some of them only.
func ApplyCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crdClient := client.ApiextensionsV1().CustomResourceDefinitions()
	force := true
	for _, crd := range crds {
		body, err := applyBody(crd)
		if err != nil {
			return err
		}
		_, err = crdClient.Patch(ctx, crd.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
		if err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
		}
	}

	waitCtx, cancel := context.WithTimeout(ctx, crdEstablishTimeout)
	defer cancel()
	for _, crd := range crds {
		var last *apiextensionsv1.CustomResourceDefinition
		err := wait.PollUntilContextCancel(waitCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := crdClient.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // keep polling through transient errors until the deadline
			}
			last = got
			return crdCondition(got, apiextensionsv1.Established) && crdCondition(got, apiextensionsv1.NamesAccepted), nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established within %s: %s", crd.Name, crdEstablishTimeout, describeConditions(last))
		}
	}
	return nil
}

// applyBody is the CRD as an apply request: status is the server's to write,
// so it is left out rather than sent empty (an empty status would still claim
// ownership of fields such as status.acceptedNames).
func applyBody(crd *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, fmt.Errorf("encoding CRD %s: %w", crd.Name, err)
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	return json.Marshal(obj)
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func describeConditions(crd *apiextensionsv1.CustomResourceDefinition) string {
	if crd == nil {
		return "never read back from the API server"
	}
	if len(crd.Status.Conditions) == 0 {
		return "no conditions yet"
	}
	var parts []string
	for _, c := range crd.Status.Conditions {
		part := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Message != "" {
			part += " (" + c.Message + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}
