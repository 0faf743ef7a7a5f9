package celenv

import (
	"bytes"
	"compress/gzip"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/go-containerregistry/pkg/name"
)

// Kyverno's CEL libraries that need nothing from the world (spec
// cel-policy-types.md §4): image references (image, parseImageReference,
// isImage and the Image methods), math.round, x509.decode, listObjToMap
// and gzip. They are plain functions of their arguments, so the CLI and
// the cluster give the same answers offline.

// imageRefType is the CEL type of a parsed image reference.
var imageRefType = celgo.OpaqueType("kyverno.image")

// imageRef is a parsed image reference. raw is the text it was parsed
// from: go-containerregistry keeps no tag on a reference that also has a
// digest ("nginx:1.27@sha256:..."), and Kyverno reads it back from there.
type imageRef struct {
	ref name.Reference
	raw string
}

func (i imageRef) ConvertToNative(t reflect.Type) (any, error) {
	if t.Kind() == reflect.String {
		return i.raw, nil
	}
	return nil, fmt.Errorf("an image reference converts to no %v", t)
}

func (i imageRef) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.StringType:
		return types.String(i.raw)
	case imageRefType, types.TypeType:
		if t == types.TypeType {
			return imageRefType
		}
		return i
	}
	return types.NewErr("type conversion error from %s to %s", imageRefType, t)
}

func (i imageRef) Equal(o ref.Val) ref.Val {
	other, ok := o.(imageRef)
	return types.Bool(ok && other.ref.Name() == i.ref.Name() && other.tag() == i.tag())
}

func (i imageRef) Type() ref.Type { return imageRefType }
func (i imageRef) Value() any     { return i.ref }

// tag is the tag named: the reference's own, or for a digest reference
// the one written before the '@' (after the last '/', so a registry port
// is no tag); "" when none was written with a digest.
func (i imageRef) tag() string {
	if t, ok := i.ref.(name.Tag); ok {
		return t.TagStr()
	}
	before, _, found := strings.Cut(i.raw, "@")
	if !found {
		return ""
	}
	colon := strings.LastIndex(before, ":")
	if colon < 0 || colon < strings.LastIndex(before, "/") {
		return ""
	}
	return before[colon+1:]
}

func (i imageRef) digest() string {
	if d, ok := i.ref.(name.Digest); ok {
		return d.DigestStr()
	}
	return ""
}

// identifier is the tag or the digest, "tag@digest" when both are written.
func (i imageRef) identifier() string {
	if d := i.digest(); d != "" {
		if t := i.tag(); t != "" {
			return t + "@" + d
		}
		return d
	}
	return i.ref.Identifier()
}

func parseImageRef(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	r, err := name.ParseReference(string(s))
	if err != nil {
		return types.NewErr("%v", err)
	}
	return imageRef{ref: r, raw: string(s)}
}

func isImageRef(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	_, err := name.ParseReference(string(s))
	return types.Bool(err == nil)
}

// imageMethod declares a method of Image returning what get reads.
func imageMethod(method string, result *celgo.Type, get func(imageRef) ref.Val) celgo.EnvOption {
	return celgo.Function(method, celgo.MemberOverload("kyverno_image_"+method, []*celgo.Type{imageRefType}, result,
		celgo.UnaryBinding(func(v ref.Val) ref.Val {
			i, ok := v.(imageRef)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			return get(i)
		})))
}

// mathRound rounds to prec decimal places, halves away from zero:
// math.round(1.256, 2) == 1.26.
func mathRound(v, prec ref.Val) ref.Val {
	x, ok1 := v.(types.Double)
	p, ok2 := prec.(types.Int)
	if !ok1 || !ok2 {
		return types.MaybeNoSuchOverloadErr(v)
	}
	shift := math.Pow(10, float64(p))
	return types.Double(math.Round(float64(x)*shift) / shift)
}

// listObjToMap maps, for each index i, keys[i][keyField] to
// values[i][valueField]; lists of different lengths are an error.
func listObjToMap(args ...ref.Val) ref.Val {
	if len(args) != 4 {
		return types.NewErr("listObjToMap takes 4 arguments, got %d", len(args))
	}
	keys, ok1 := args[0].(traits.Lister)
	values, ok2 := args[1].(traits.Lister)
	keyField, ok3 := args[2].(types.String)
	valueField, ok4 := args[3].(types.String)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return types.MaybeNoSuchOverloadErr(args[0])
	}
	n, m := keys.Size().(types.Int), values.Size().(types.Int)
	if n != m {
		return types.NewErr("listObjToMap must take lists of equal length. list1: %d, list2: %d", n, m)
	}
	out := make(map[string]any, n)
	for i := types.Int(0); i < n; i++ {
		k, ok := keys.Get(i).(traits.Mapper)
		if !ok {
			return types.NewErr("listObjToMap: key list entry %d is not an object", i)
		}
		key, found := k.Find(keyField)
		if s, isString := key.(types.String); found && isString {
			v, ok := values.Get(i).(traits.Mapper)
			if !ok {
				return types.NewErr("listObjToMap: value list entry %d is not an object", i)
			}
			if val, found := v.Find(valueField); found {
				out[string(s)] = val
			} else {
				out[string(s)] = types.NullValue
			}
			continue
		}
		return types.NewErr("listObjToMap: key list entry %d has no string field %q", i, string(keyField))
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

// gzipCompress compresses a string with a zero modification time, so the
// same input always gives the same bytes.
func gzipCompress(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.ModTime = time.Unix(0, 0)
	if _, err := w.Write([]byte(s)); err != nil {
		return types.NewErr("gzip.compress: %v", err)
	}
	if err := w.Close(); err != nil {
		return types.NewErr("gzip.compress: %v", err)
	}
	return types.Bytes(buf.Bytes())
}

func gzipDecompress(v ref.Val) ref.Val {
	b, ok := v.(types.Bytes)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return types.NewErr("gzip.decompress: %v", err)
	}
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return types.NewErr("gzip.decompress: %v", err)
	}
	if len(out) > maxDecompressed {
		return types.NewErr("gzip.decompress: more than %d bytes", maxDecompressed)
	}
	return types.String(out)
}

// maxDecompressed bounds gzip.decompress, so a small policy input cannot
// make the webhook allocate gigabytes.
const maxDecompressed = 16 << 20

// x509Decode decodes a PEM CERTIFICATE or CERTIFICATE REQUEST with an RSA
// key into a map of Go's field names, as Kyverno's x509.decode does: the
// raw fields base64, times RFC 3339, the public key as {N, E}.
func x509Decode(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return types.NewErr("failed to decode PEM block")
	}
	var out any
	switch block.Type {
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return types.NewErr("%v", err)
		}
		key, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok {
			return types.NewErr("certificate should use rsa algorithm")
		}
		cert.PublicKey = rsaKey{N: key.N.String(), E: key.E}
		raw := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
		out = struct {
			*x509.Certificate
			Raw, RawTBSCertificate, RawSubjectPublicKeyInfo, RawSubject, RawIssuer, Signature string
			NotBefore, NotAfter                                                               string
			SerialNumber                                                                      int64
		}{cert, raw(cert.Raw), raw(cert.RawTBSCertificate), raw(cert.RawSubjectPublicKeyInfo), raw(cert.RawSubject), raw(cert.RawIssuer), raw(cert.Signature),
			cert.NotBefore.Format(time.RFC3339), cert.NotAfter.Format(time.RFC3339), cert.SerialNumber.Int64()}
	case "CERTIFICATE REQUEST":
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return types.NewErr("%v", err)
		}
		key, ok := csr.PublicKey.(*rsa.PublicKey)
		if !ok {
			return types.NewErr("certificate should use rsa algorithm")
		}
		csr.PublicKey = rsaKey{N: key.N.String(), E: key.E}
		out = csr
	default:
		return types.NewErr("PEM block neither contains a CERTIFICATE or CERTIFICATE REQUEST")
	}
	data, err := json.Marshal(out)
	if err != nil {
		return types.NewErr("x509.decode: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return types.NewErr("x509.decode: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(m)
}

// rsaKey is an RSA public key as x509.decode shows it.
type rsaKey struct {
	N string
	E int
}

func PureLibraryOptions() []celgo.EnvOption {
	opts := []celgo.EnvOption{
		// base64.encode/decode, cel.bind and math.*: cel-go's Encoders,
		// Bindings and Math, which Kyverno adds to the Kubernetes
		// environment.
		ext.Encoders(), ext.Bindings(), ext.Math(),
		// regex.replace, regex.extract and regex.extractAll: cel-go's
		// Regex, which Kyverno adds too (cel-policy-types.md §3.1).
		ext.Regex(),
		// image is also the receiver of image.GetMetadata: a variable and
		// a global function of the same name live side by side in CEL.
		Global("image", celgo.Overload("kyverno_image_string", []*celgo.Type{str}, imageRefType, celgo.UnaryBinding(parseImageRef))),
		Global("parseImageReference", celgo.Overload("kyverno_parse_image_reference_string", []*celgo.Type{str}, imageRefType, celgo.UnaryBinding(parseImageRef))),
		Global("isImage", celgo.Overload("kyverno_is_image_string", []*celgo.Type{str}, celgo.BoolType, celgo.UnaryBinding(isImageRef))),
		imageMethod("registry", str, func(i imageRef) ref.Val { return types.String(i.ref.Context().RegistryStr()) }),
		imageMethod("repository", str, func(i imageRef) ref.Val { return types.String(i.ref.Context().RepositoryStr()) }),
		imageMethod("identifier", str, func(i imageRef) ref.Val { return types.String(i.identifier()) }),
		imageMethod("tag", str, func(i imageRef) ref.Val { return types.String(i.tag()) }),
		imageMethod("digest", str, func(i imageRef) ref.Val { return types.String(i.digest()) }),
		imageMethod("containsDigest", celgo.BoolType, func(i imageRef) ref.Val { return types.Bool(i.digest() != "") }),
		Global("math.round", celgo.Overload("kyverno_math_round_double_int", []*celgo.Type{celgo.DoubleType, celgo.IntType}, celgo.DoubleType, celgo.BinaryBinding(mathRound))),
		Global("x509.decode", celgo.Overload("kyverno_x509_decode_string", []*celgo.Type{str}, dyn, celgo.UnaryBinding(x509Decode))),
		Global("gzip.compress", celgo.Overload("kyverno_gzip_compress_string", []*celgo.Type{str}, celgo.BytesType, celgo.UnaryBinding(gzipCompress))),
		Global("gzip.decompress", celgo.Overload("kyverno_gzip_decompress_bytes", []*celgo.Type{celgo.BytesType}, str, celgo.UnaryBinding(gzipDecompress))),
	}
	for _, n := range []string{"listObjToMap", "transform.listObjToMap"} {
		anyList := celgo.ListType(dyn)
		opts = append(opts, Global(n, celgo.Overload("kyverno_"+strings.ReplaceAll(n, ".", "_"), []*celgo.Type{anyList, anyList, str, str}, dyn,
			celgo.FunctionBinding(listObjToMap))))
	}
	return opts
}
