package cpol

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
)

// defaultAnnotationDomain is where k8s-manifest-sigstore (and Kyverno)
// keep a signed manifest's message and signature.
const defaultAnnotationDomain = "cosign.sigstore.dev"

// maxSignedManifest bounds the decompressed message, so that a small
// annotation cannot expand into gigabytes in the admission path.
const maxSignedManifest = 8 << 20

// manifestsRule is a compiled validate.manifests block: signed YAML
// manifests carried in the resource's annotations, verified with inline
// public keys, then compared with the admitted object.
type manifestsRule struct {
	domain  string
	sets    []manifestAttestorSet
	ignores []kyvernov1.ObjectFieldBinding
}

type manifestAttestorSet struct {
	// count entries must verify; all of them when the policy sets none.
	count    int
	verifier []signature.Verifier
}

// compileManifests loads the attestors' keys. Only inline public keys are
// run: certificates, keyless signing, KMS, Secret references, nested
// attestors and an OCI repository would need I/O the engine does not do,
// so such a policy is refused rather than half-verified.
func compileManifests(m *kyvernov1.Manifests, path string, f *fault.Collector) *manifestsRule {
	out := &manifestsRule{domain: m.AnnotationDomain, ignores: m.IgnoreFields}
	if out.domain == "" {
		out.domain = defaultAnnotationDomain
	}
	if m.Repository != "" {
		f.Add(path+".repository", "signatures in an OCI repository are not supported by charter; sign the manifest into its annotations")
	}
	if m.DryRunOption.Enable {
		f.Add(path+".dryRun", "dry-run matching is not supported by charter")
	}
	if len(m.Attestors) == 0 {
		f.Add(path+".attestors", "validate.manifests needs at least one attestor")
	}
	for i, set := range m.Attestors {
		sp := fmt.Sprintf("%s.attestors[%d]", path, i)
		s := manifestAttestorSet{count: len(set.Entries)}
		if set.Count != nil {
			s.count = *set.Count
		}
		if len(set.Entries) == 0 {
			f.Add(sp+".entries", "an attestor set needs at least one entry")
		}
		if s.count < 1 || s.count > len(set.Entries) {
			f.Add(sp+".count", fmt.Sprintf("count %d is not between 1 and the %d entries", s.count, len(set.Entries)))
		}
		for j, e := range set.Entries {
			ep := fmt.Sprintf("%s.entries[%d]", sp, j)
			if e.Keys == nil || e.Certificates != nil || e.Keyless != nil || e.Attestor != nil {
				f.Add(ep, "charter verifies signed manifests with inline public keys (keys.publicKeys) only")
				continue
			}
			v, err := manifestVerifier(e.Keys)
			if err != nil {
				f.Add(ep+".keys", err.Error())
				continue
			}
			s.verifier = append(s.verifier, v)
		}
		out.sets = append(out.sets, s)
	}
	return out
}

func manifestVerifier(k *kyvernov1.StaticKeyAttestor) (signature.Verifier, error) {
	if k.KMS != "" || k.Secret != nil || strings.HasPrefix(k.PublicKeys, "k8s://") {
		return nil, errors.New("charter verifies signed manifests with inline PEM public keys only (no KMS or Secret)")
	}
	hash := crypto.SHA256
	switch strings.ToLower(k.SignatureAlgorithm) {
	case "", "sha256":
	case "sha384":
		hash = crypto.SHA384
	case "sha512":
		hash = crypto.SHA512
	default:
		return nil, fmt.Errorf("unknown signatureAlgorithm %q", k.SignatureAlgorithm)
	}
	pk, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(k.PublicKeys))
	if err != nil {
		return nil, fmt.Errorf("publicKeys is not a PEM public key: %v", err)
	}
	return signature.LoadVerifier(pk, hash)
}

// verifyManifest decides the rule for resource: its signature annotations
// must verify with enough keys of every attestor set, and the signed
// manifest of the same kind and name must match the resource, apart from
// ignored and volatile fields.
func (m *manifestsRule) verify(rule string, resource map[string]any) review.Outcome {
	meta, _ := resource["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	msgB64, _ := ann[m.domain+"/message"].(string)
	sigB64, _ := ann[m.domain+"/signature"].(string)
	if msgB64 == "" || sigB64 == "" {
		return review.Fail(fmt.Sprintf("validation error: rule %s failed: the resource is not signed: annotations %s/message and %s/signature are required", rule, m.domain, m.domain))
	}
	payload, err := decodeManifestMessage(msgB64)
	if err != nil {
		return review.Fail(fmt.Sprintf("validation error: rule %s failed: annotation %s/message: %v", rule, m.domain, err))
	}
	sig, err := decodeManifestSignature(sigB64)
	if err != nil {
		return review.Fail(fmt.Sprintf("validation error: rule %s failed: annotation %s/signature: %v", rule, m.domain, err))
	}
	for i, set := range m.sets {
		ok := 0
		for _, v := range set.verifier {
			if v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(payload)) == nil {
				ok++
			}
		}
		if ok < set.count {
			return review.Fail(fmt.Sprintf("validation error: rule %s failed: .attestors[%d]: %d of %d required signatures verified", rule, i, ok, set.count))
		}
	}
	docs, err := signedManifests(payload)
	if err != nil {
		return review.Fail(fmt.Sprintf("validation error: rule %s failed: signed message: %v", rule, err))
	}
	signed := findManifest(docs, resource)
	if signed == nil {
		return review.Fail(fmt.Sprintf("validation error: rule %s failed: the signed message holds no manifest of %s %s", rule, resource["kind"], meta["name"]))
	}
	ignored := m.ignoredFields(resource)
	if diff := manifestDiff(signed, resource, "", "", ignored); diff != "" {
		return review.Fail(fmt.Sprintf("validation error: rule %s failed: the resource differs from its signed manifest at %s", rule, diff))
	}
	return review.Pass("manifest verified")
}

// decodeManifestMessage turns the message annotation (base64 of a gzip
// stream) into the bytes that were signed.
func decodeManifestMessage(b64 string) ([]byte, error) {
	gz, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("not base64: %v", err)
	}
	return gunzip(gz)
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxSignedManifest+1))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %v", err)
	}
	if len(out) > maxSignedManifest {
		return nil, fmt.Errorf("larger than %d bytes", maxSignedManifest)
	}
	return out, nil
}

// decodeManifestSignature accepts the signature as k8s-manifest-sigstore
// writes it: base64 of the raw signature, or base64 of cosign's base64
// output.
func decodeManifestSignature(b64 string) ([]byte, error) {
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("not base64: %v", err)
	}
	if inner, err := base64.StdEncoding.DecodeString(string(sig)); err == nil && len(inner) > 0 {
		return inner, nil
	}
	return sig, nil
}

// signedManifests reads the YAML documents of the signed payload: a tar
// (possibly gzipped again) of YAML files, or YAML itself.
func signedManifests(payload []byte) ([]map[string]any, error) {
	if len(payload) > 2 && payload[0] == 0x1f && payload[1] == 0x8b {
		inner, err := gunzip(payload)
		if err != nil {
			return nil, err
		}
		payload = inner
	}
	var files [][]byte
	tr := tar.NewReader(bytes.NewReader(payload))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			files = nil
			break
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxSignedManifest))
		if err != nil {
			return nil, err
		}
		files = append(files, b)
	}
	if files == nil {
		files = [][]byte{payload}
	}
	var docs []map[string]any
	for _, f := range files {
		for _, d := range splitYAMLDocuments(f) {
			var obj map[string]any
			if err := yaml.Unmarshal(d, &obj); err != nil {
				return nil, fmt.Errorf("invalid YAML: %v", err)
			}
			if obj != nil {
				docs = append(docs, obj)
			}
		}
	}
	return docs, nil
}

func splitYAMLDocuments(b []byte) [][]byte {
	var out [][]byte
	var cur []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimRight(line, " \r") == "---" {
			out = append(out, []byte(strings.Join(cur, "\n")))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	return append(out, []byte(strings.Join(cur, "\n")))
}

// findManifest is the signed document of the resource's apiVersion, kind,
// name and (when the document sets one) namespace.
func findManifest(docs []map[string]any, resource map[string]any) map[string]any {
	meta, _ := resource["metadata"].(map[string]any)
	for _, d := range docs {
		dm, _ := d["metadata"].(map[string]any)
		if d["kind"] != resource["kind"] || d["apiVersion"] != resource["apiVersion"] || dm["name"] != meta["name"] {
			continue
		}
		if ns, ok := dm["namespace"]; ok && ns != meta["namespace"] {
			continue
		}
		return d
	}
	return nil
}

// volatileManifestFields change after signing without changing what the
// manifest asks for: the API server sets them.
var volatileManifestFields = []string{
	"metadata.managedFields", "metadata.resourceVersion", "metadata.uid", "metadata.generation",
	"metadata.creationTimestamp", "metadata.selfLink", "metadata.deletionTimestamp",
	"metadata.deletionGracePeriodSeconds", "metadata.ownerReferences", "metadata.finalizers",
	"metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
	"metadata.annotations.deployment.kubernetes.io/revision", "status",
}

// ignoredFields are the dotted paths not compared for resource: the
// volatile ones, the signature annotations and the policy's ignoreFields
// whose objects match the resource.
func (m *manifestsRule) ignoredFields(resource map[string]any) map[string]bool {
	out := map[string]bool{}
	for _, f := range volatileManifestFields {
		out[f] = true
	}
	for _, a := range []string{"message", "signature", "certificate", "bundle"} {
		out["metadata.annotations."+m.domain+"/"+a] = true
	}
	meta, _ := resource["metadata"].(map[string]any)
	apiVersion, _ := resource["apiVersion"].(string)
	group, version := "", apiVersion
	if i := strings.Index(apiVersion, "/"); i >= 0 {
		group, version = apiVersion[:i], apiVersion[i+1:]
	}
	for _, b := range m.ignores {
		match := len(b.Objects) == 0
		for _, o := range b.Objects {
			if (o.Kind == "" || o.Kind == resource["kind"]) && (o.Group == "" || o.Group == group) &&
				(o.Version == "" || o.Version == version) && (o.Name == "" || o.Name == meta["name"]) &&
				(o.Namespace == "" || o.Namespace == meta["namespace"]) {
				match = true
			}
		}
		if match {
			for _, f := range b.Fields {
				out[f] = true
			}
		}
	}
	return out
}

// manifestDiff returns the first path where the signed manifest is not
// met by the object, "" when it is. As k8s-manifest-sigstore does without
// a dry run, fields the object has beyond the manifest (defaults the API
// server filled in) are not differences; lists must have the same length.
// Key is the path matched against ignored fields, where a list index is
// written [*] (spec.containers[*].image); shown is the path with indexes.
func manifestDiff(signed, obj any, key, shown string, ignored map[string]bool) string {
	if ignored[key] {
		return ""
	}
	switch s := signed.(type) {
	case map[string]any:
		o, ok := obj.(map[string]any)
		if !ok {
			return orRoot(shown)
		}
		for _, k := range slices.Sorted(maps.Keys(s)) {
			sv := s[k]
			ck, cs := k, k
			if key != "" {
				ck, cs = key+"."+k, shown+"."+k
			}
			ov, ok := o[k]
			if !ok {
				if ignored[ck] || isEmpty(sv) {
					continue
				}
				return cs
			}
			if d := manifestDiff(sv, ov, ck, cs, ignored); d != "" {
				return d
			}
		}
		return ""
	case []any:
		o, ok := obj.([]any)
		if !ok || len(o) != len(s) {
			return orRoot(shown)
		}
		for i := range s {
			if d := manifestDiff(s[i], o[i], key+"[*]", fmt.Sprintf("%s[%d]", shown, i), ignored); d != "" {
				return d
			}
		}
		return ""
	default:
		if !scalarEqual(signed, obj) {
			return orRoot(shown)
		}
		return ""
	}
}

func orRoot(path string) string {
	if path == "" {
		return "the root"
	}
	return path
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// scalarEqual compares YAML and JSON scalars: numbers decode as int64 from
// YAML and float64 from JSON.
func scalarEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
