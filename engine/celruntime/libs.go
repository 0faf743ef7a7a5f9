package celruntime

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// Kyverno's CEL libraries for policies.kyverno.io policies (spec
// cel-policy-types.md §4): the receivers resource, image, globalContext and
// http are variables bound per evaluation to what the engine is handed
// (Loaders), so the engine stays pure; json, yaml, time, the hashes,
// random and parseServiceAccount are plain functions. Every method exists
// in PascalCase and camelCase, as in Kyverno from 1.18 on.

var (
	resourceLibType      = celgo.OpaqueType("charter.ResourceContext")
	imageDataLibType     = celgo.OpaqueType("charter.ImageDataContext")
	globalContextLibType = celgo.OpaqueType("charter.GlobalContext")
	httpLibType          = celgo.OpaqueType("charter.HTTPContext")
)

// Names of the receivers and other variables CEL policies add to the VAP
// environment.
const (
	resourceVar      = "resource"
	imageDataVar     = "image"
	globalContextVar = "globalContext"
	httpVar          = "http"
	exceptionsVar    = "exceptions"
)

// libContext is the value of a receiver variable: what its methods need to
// reach the world through the evaluation's loaders.
type libContext struct {
	ctx     context.Context
	loaders *loader.Loaders
	// namespace binds the methods without a namespace argument, which
	// namespaced policies use, to the policy's namespace.
	namespace string
	typ       ref.Type
	// caBundle is what an http receiver made by http.Client(caPEM)
	// trusts instead of the system roots.
	caBundle string
}

func (c *libContext) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("a library receiver has no native value")
}
func (c *libContext) ConvertToType(ref.Type) ref.Val {
	return types.NewErr("a library receiver cannot be converted")
}
func (c *libContext) Equal(o ref.Val) ref.Val { return types.Bool(o == ref.Val(c)) }
func (c *libContext) Type() ref.Type          { return c.typ }
func (c *libContext) Value() any              { return c }

// LibReceivers are the receiver values of one evaluation, made when an
// expression first names them: most policies use none.
type LibReceivers struct {
	Ctx     context.Context
	Loaders *loader.Loaders
	// namespace binds the methods without a namespace argument to the
	// policy's namespace (see libContext).
	Namespace                     string
	resource, image, global, http *libContext
}

// NewLibReceivers are the receivers of Kyverno's CEL libraries for one
// evaluation of a policy acting in namespace ("" for a cluster-wide one).
func NewLibReceivers(ctx context.Context, l *loader.Loaders, namespace string) *LibReceivers {
	return &LibReceivers{Ctx: ctx, Loaders: l, Namespace: namespace}
}

func (r *LibReceivers) resolve(name string) (any, bool) {
	switch name {
	case resourceVar:
		return r.receiver(&r.resource, resourceLibType), true
	case imageDataVar:
		return r.receiver(&r.image, imageDataLibType), true
	case globalContextVar:
		return r.receiver(&r.global, globalContextLibType), true
	case httpVar:
		return r.receiver(&r.http, httpLibType), true
	}
	return nil, false
}

// receiver returns *c, made on first use: a receiver is the same value for
// the whole evaluation (libContext.Equal compares identity).
func (r *LibReceivers) receiver(c **libContext, t ref.Type) *libContext {
	if *c == nil {
		*c = &libContext{ctx: r.Ctx, loaders: r.Loaders, namespace: r.Namespace, typ: t}
	}
	return *c
}

// withKyvernoLibraries extends the VAP environment with Kyverno's libraries
// and the exceptions variable.
func withKyvernoLibraries(env *environment.EnvSet) (*environment.EnvSet, error) {
	return env.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        kyvernoLibraryOptions(),
	})
}

var (
	str  = celgo.StringType
	dyn  = celgo.DynType
	strs = celgo.MapType(celgo.StringType, celgo.StringType)
)

func kyvernoLibraryOptions() []celgo.EnvOption {
	opts := []celgo.EnvOption{
		celgo.Variable(resourceVar, resourceLibType),
		celgo.Variable(imageDataVar, imageDataLibType),
		celgo.Variable(globalContextVar, globalContextLibType),
		celgo.Variable(httpVar, httpLibType),
		celgo.Variable(exceptionsVar, celgo.MapType(celgo.StringType, celgo.ListType(celgo.StringType))),
	}
	opts = append(opts, celenv.Method("Get", append([]func(string) celgo.FunctionOpt{
		celenv.Member("resource_get", []*celgo.Type{resourceLibType, str, str, str, str}, dyn, resourceGet),
		celenv.Member("resource_get_ns", []*celgo.Type{resourceLibType, str, str, str}, dyn, resourceGetOwnNamespace),
		celenv.Member("global_get", []*celgo.Type{globalContextLibType, str}, dyn, globalGet),
		celenv.Member("global_get_projection", []*celgo.Type{globalContextLibType, str, str}, dyn, globalGetProjection),
		celenv.Member("http_get", []*celgo.Type{httpLibType, str}, dyn, httpGet),
		celenv.Member("http_get_headers", []*celgo.Type{httpLibType, str, strs}, dyn, httpGet),
	}, resourceGetGVROverloads()...)...)...)
	opts = append(opts, celenv.Method("List", append([]func(string) celgo.FunctionOpt{
		celenv.Member("resource_list", []*celgo.Type{resourceLibType, str, str, str}, dyn, resourceList),
		celenv.Member("resource_list_labels", []*celgo.Type{resourceLibType, str, str, str, strs}, dyn, resourceList),
		celenv.Member("resource_list_ns", []*celgo.Type{resourceLibType, str, str}, dyn, resourceListOwnNamespace),
	}, resourceListGVROverloads()...)...)...)
	opts = append(opts, celenv.Method("Post", append([]func(string) celgo.FunctionOpt{
		celenv.Member("http_post", []*celgo.Type{httpLibType, str, dyn}, dyn, httpPost),
		celenv.Member("http_post_headers", []*celgo.Type{httpLibType, str, dyn, strs}, dyn, httpPost),
	}, resourcePostOverloads()...)...)...)
	opts = append(opts, resourceWriteOptions()...)
	opts = append(opts, celenv.Method("Client",
		celenv.Member("http_client", []*celgo.Type{httpLibType, str}, httpLibType, httpClient),
	)...)
	opts = append(opts, celenv.Method("GetMetadata",
		celenv.Member("image_metadata", []*celgo.Type{imageDataLibType, str}, dyn, imageMetadata),
	)...)
	hash := func(name string, h func(string) string) []celgo.EnvOption {
		var out []celgo.EnvOption
		for _, n := range []string{name, "hash." + name} {
			out = append(out, celenv.Global(n, celgo.Overload(strings.ReplaceAll(n, ".", "_")+"_string", []*celgo.Type{str}, str,
				celgo.UnaryBinding(func(v ref.Val) ref.Val {
					s, ok := v.(types.String)
					if !ok {
						return types.MaybeNoSuchOverloadErr(v)
					}
					return types.String(h(string(s)))
				}))))
		}
		return out
	}
	opts = append(opts, hash("sha256", func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) })...)
	opts = append(opts, hash("sha1", func(s string) string { h := sha1.Sum([]byte(s)); return hex.EncodeToString(h[:]) })...) //nolint:gosec
	opts = append(opts, hash("md5", func(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) })...)   //nolint:gosec
	for _, n := range []string{"random", "random.random"} {
		id := strings.ReplaceAll(n, ".", "_")
		opts = append(opts, celenv.Global(n,
			celgo.Overload(id+"_void", nil, str,
				celgo.FunctionBinding(func(...ref.Val) ref.Val { return types.String(randomString(8)) })),
			celgo.Overload(id+"_regex", []*celgo.Type{str}, str, celgo.UnaryBinding(randomRegex))))
	}
	for _, n := range []string{"parseServiceAccount", "user.parseServiceAccount"} {
		opts = append(opts, celenv.Global(n, celgo.Overload(strings.ReplaceAll(n, ".", "_")+"_string", []*celgo.Type{str}, dyn,
			celgo.UnaryBinding(parseServiceAccount))))
	}
	opts = append(opts,
		celenv.Global("json.unmarshal", celgo.Overload("json_unmarshal_string", []*celgo.Type{str}, dyn, celgo.UnaryBinding(jsonUnmarshal))),
		celenv.Global("json.marshal", celgo.Overload("json_marshal_dyn", []*celgo.Type{dyn}, str, celgo.UnaryBinding(jsonMarshal))),
		celenv.Global("yaml.parse", celgo.Overload("yaml_parse_string", []*celgo.Type{str}, dyn, celgo.UnaryBinding(yamlParse))),
		celenv.Global("time.now", celgo.Overload("time_now", nil, celgo.TimestampType,
			celgo.FunctionBinding(func(...ref.Val) ref.Val { return types.Timestamp{Time: time.Now().UTC()} }))),
		celenv.Global("time.truncate", celgo.Overload("time_truncate", []*celgo.Type{celgo.TimestampType, celgo.DurationType}, celgo.TimestampType,
			celgo.BinaryBinding(func(ts, d ref.Val) ref.Val {
				t, ok1 := ts.(types.Timestamp)
				dur, ok2 := d.(types.Duration)
				if !ok1 || !ok2 {
					return types.MaybeNoSuchOverloadErr(ts)
				}
				return types.Timestamp{Time: t.Time.Truncate(dur.Duration)}
			}))),
		celenv.Global("time.toCron", celgo.Overload("time_to_cron", []*celgo.Type{celgo.TimestampType}, str,
			celgo.UnaryBinding(func(ts ref.Val) ref.Val {
				t, ok := ts.(types.Timestamp)
				if !ok {
					return types.MaybeNoSuchOverloadErr(ts)
				}
				u := t.Time.UTC()
				return types.String(fmt.Sprintf("%d %d %d %d %d", u.Minute(), u.Hour(), u.Day(), int(u.Month()), int(u.Weekday())))
			}))),
	)
	return append(opts, celenv.PureLibraryOptions()...)
}

func libReceiver(v ref.Val) (*libContext, bool) {
	c, ok := v.(*libContext)
	return c, ok
}

func strArgs(args []ref.Val, n int) ([]string, bool) {
	out := make([]string, n)
	for i := range n {
		s, ok := args[i].(types.String)
		if !ok {
			return nil, false
		}
		out[i] = string(s)
	}
	return out, true
}

func resourceGet(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 4)
	if !ok || !ok2 {
		return types.NewErr("resource.Get: want (apiVersion, resource, namespace, name)")
	}
	return c.get(s[0], s[1], s[2], s[3])
}

func resourceGetOwnNamespace(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 3)
	if !ok || !ok2 {
		return types.NewErr("resource.Get: want (apiVersion, resource, name)")
	}
	if c.namespace == "" {
		return types.NewErr("resource.Get without a namespace is for namespaced policies")
	}
	return c.get(s[0], s[1], c.namespace, s[2])
}

func (c *libContext) get(apiVersion, resource, namespace, name string) ref.Val {
	if c.namespace != "" && namespace != c.namespace {
		return types.NewErr("failed to get resource: a namespaced policy reads only its own namespace %q", c.namespace)
	}
	l := c.loaders.Resources
	if l == nil {
		return types.NewErr("failed to get resource: no resource loader (resource.* is not available here)")
	}
	obj, err := l.Resource(c.ctx, apiVersion, resource, namespace, name)
	if err != nil {
		return types.NewErr("failed to get resource: %v", err)
	}
	if obj == nil {
		return types.NullValue
	}
	return types.DefaultTypeAdapter.NativeToValue(obj)
}

func resourceList(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 3)
	if !ok || !ok2 {
		return types.NewErr("resource.List: want (apiVersion, resource, namespace[, labels])")
	}
	var sel map[string]string
	if len(args) == 5 {
		m, err := args[4].ConvertToNative(reflect.TypeFor[map[string]string]())
		if err != nil {
			return types.NewErr("resource.List: labels: %v", err)
		}
		sel = m.(map[string]string)
	}
	return c.list(s[0], s[1], s[2], sel)
}

func resourceListOwnNamespace(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 2)
	if !ok || !ok2 {
		return types.NewErr("resource.List: want (apiVersion, resource)")
	}
	if c.namespace == "" {
		return types.NewErr("resource.List without a namespace is for namespaced policies")
	}
	return c.list(s[0], s[1], c.namespace, nil)
}

func (c *libContext) list(apiVersion, resource, namespace string, sel map[string]string) ref.Val {
	if c.namespace != "" && namespace != c.namespace {
		return types.NewErr("failed to list resource: a namespaced policy reads only its own namespace %q", c.namespace)
	}
	l := c.loaders.Resources
	if l == nil {
		return types.NewErr("failed to list resource: no resource loader (resource.* is not available here)")
	}
	objs, err := l.Resources(c.ctx, apiVersion, resource, namespace)
	if err != nil {
		return types.NewErr("failed to list resource: %v", err)
	}
	selector := labels.SelectorFromSet(sel)
	items := make([]any, 0, len(objs))
	for _, o := range objs {
		meta, _ := o["metadata"].(map[string]any)
		if len(sel) > 0 && !selector.Matches(labels.Set(review.StringMap(meta["labels"]))) {
			continue
		}
		items = append(items, o)
	}
	return types.DefaultTypeAdapter.NativeToValue(map[string]any{"apiVersion": apiVersion, "items": items})
}

func globalGet(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 1)
	if !ok || !ok2 {
		return types.NewErr("globalContext.Get: want (name)")
	}
	return c.global(s[0], "")
}

func globalGetProjection(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 2)
	if !ok || !ok2 {
		return types.NewErr("globalContext.Get: want (name, projection)")
	}
	return c.global(s[0], s[1])
}

func (c *libContext) global(name, projection string) ref.Val {
	l := c.loaders.GlobalContext
	if l == nil {
		return types.NewErr("failed to get global reference: no global context here")
	}
	key := name
	if projection != "" {
		key = name + "." + projection
	}
	v, err := ReadGlobalContext(c.ctx, l, key, c.namespace)
	if err != nil {
		// An unknown entry is null, with or without a projection, as
		// Kyverno's (its chainsaw test
		// validating-policies/context/globalreference-missing-graceful-edge-cases);
		// one that exists but cannot load, or lacks the projection, is
		// an error: never empty data that could pass a policy.
		if errors.Is(err, loader.ErrGlobalContextEntryNotFound) {
			return types.NullValue
		}
		return types.NewErr("failed to get global reference: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

func httpGet(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 1)
	if !ok || !ok2 {
		return types.NewErr("http.Get: want (url[, headers])")
	}
	headers, err := httpHeaders(args, 2)
	if err != nil {
		return types.NewErr("http.Get: headers: %v", err)
	}
	return c.http("GET", s[0], nil, headers)
}

func httpPost(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 1)
	if !ok || !ok2 {
		return types.NewErr("http.Post: want (url, body[, headers])")
	}
	body, err := args[2].ConvertToNative(reflect.TypeFor[any]())
	if err != nil {
		return types.NewErr("http.Post: body: %v", err)
	}
	headers, err := httpHeaders(args, 3)
	if err != nil {
		return types.NewErr("http.Post: headers: %v", err)
	}
	data, _ := PlainJSON(body).(map[string]any)
	return c.http("POST", s[0], data, headers)
}

// httpHeaders reads the optional headers argument at index i, in the
// order of their names so requests are the same from one call to the
// next.
func httpHeaders(args []ref.Val, i int) ([]loader.APICallHeader, error) {
	if len(args) <= i {
		return nil, nil
	}
	m, err := args[i].ConvertToNative(reflect.TypeFor[map[string]string]())
	if err != nil {
		return nil, err
	}
	headers := m.(map[string]string)
	out := make([]loader.APICallHeader, 0, len(headers))
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		out = append(out, loader.APICallHeader{Key: k, Value: headers[k]})
	}
	return out, nil
}

// httpClient is http.Client(caPEM): an http receiver whose requests trust
// the PEM CA bundle, with Kyverno's error for a bundle with no
// certificate in it.
func httpClient(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 1)
	if !ok || !ok2 {
		return types.NewErr("http.Client: want (caBundle)")
	}
	if !x509.NewCertPool().AppendCertsFromPEM([]byte(s[0])) {
		return types.NewErr("failed to parse PEM CA bundle for APICall")
	}
	client := *c
	client.caBundle = s[0]
	return &client
}

func (c *libContext) http(method, url string, data map[string]any, headers []loader.APICallHeader) ref.Val {
	l := c.loaders.APICalls
	if l == nil {
		return types.NewErr("request failed: no HTTP client here")
	}
	v, err := l.Call(c.ctx, loader.APICall{URL: url, Method: method, Data: data, Headers: headers, CABundle: c.caBundle, Library: true, Namespace: c.namespace})
	if err != nil {
		return types.NewErr("request failed: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(httpAnswer(v))
}

// httpAnswer shapes a library call's {body, statusCode} as Kyverno's
// http.* answers live: a JSON object body with statusCode merged in, any
// other body as {body, statusCode}. The object keeps its whole body under
// "body" too (unless it has a field of that name), so a policy written
// against Kyverno's CLI mocks, which answer {body, statusCode}
// (`.body.allowed`), reads the same in the CLI and in the cluster.
func httpAnswer(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	body, isObject := m["body"].(map[string]any)
	if !isObject {
		return m
	}
	out := make(map[string]any, len(body)+2)
	maps.Copy(out, body)
	out["statusCode"] = m["statusCode"]
	if _, ok := out["body"]; !ok {
		out["body"] = body
	}
	return out
}

func imageMetadata(args ...ref.Val) ref.Val {
	c, ok := libReceiver(args[0])
	s, ok2 := strArgs(args[1:], 1)
	if !ok || !ok2 {
		return types.NewErr("image.GetMetadata: want (reference)")
	}
	l := c.loaders.Images
	if l == nil {
		return types.NewErr("failed to get image data: no image registry access here")
	}
	// No pull secrets: the policy names none; the process's own
	// registry credentials (its Docker config and credential helpers)
	// and anonymous access apply, as for a verifyImages entry without
	// imageRegistryCredentials.
	data, err := l.ImageData(c.ctx, s[0], loader.ImageCredentials{})
	if err != nil {
		return types.NewErr("failed to get image data: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(data)
}

// PlainJSON round-trips a native value through JSON, so CEL lists and maps
// converted to Go become plain JSON values.
func PlainJSON(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(data, &out) != nil {
		return nil
	}
	return out
}

func jsonUnmarshal(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	var out any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return types.NewErr("json.unmarshal: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

func jsonMarshal(v ref.Val) ref.Val {
	native, err := v.ConvertToNative(reflect.TypeFor[any]())
	if err != nil {
		if m, ok := v.(traits.Mapper); ok {
			native, err = m.ConvertToNative(reflect.TypeFor[map[string]any]())
		}
		if err != nil {
			return types.NewErr("json.marshal: %v", err)
		}
	}
	data, err := json.Marshal(native)
	if err != nil {
		return types.NewErr("json.marshal: %v", err)
	}
	return types.String(data)
}

func yamlParse(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	var out any
	if err := yaml.Unmarshal([]byte(s), &out); err != nil {
		return types.NewErr("yaml.parse: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

// parseServiceAccount splits "system:serviceaccount:<ns>:<name>" into
// {Name, Namespace}, with Kyverno's Go field names.
func parseServiceAccount(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	out := map[string]any{"Name": "", "Namespace": ""}
	parts := strings.Split(string(s), ":")
	if len(parts) == 4 && parts[0] == "system" && parts[1] == "serviceaccount" {
		out["Namespace"], out["Name"] = parts[2], parts[3]
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

// randomRegex is random(regex): a string the regex matches.
func randomRegex(v ref.Val) ref.Val {
	pattern, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	s, err := celenv.RandomMatching(string(pattern))
	if err != nil {
		return types.NewErr("%v", err)
	}
	return types.String(s)
}

const randomAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

func randomString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = randomAlphabet[celenv.RandomInt(len(randomAlphabet))]
	}
	return string(b)
}

// ReadGlobalContext reads an entry for a policy acting in scope ("" for a
// cluster-wide policy).
func ReadGlobalContext(ctx context.Context, l loader.GlobalContext, name, scope string) (any, error) {
	if n, ok := l.(loader.NamespacedGlobalContext); ok && scope != "" {
		return n.GlobalContextEntryForNamespace(ctx, name, scope)
	}
	return l.GlobalContextEntry(ctx, name)
}

// JSONValue converts a CEL value to a JSON value.
func JSONValue(val ref.Val) (any, error) {
	if val == types.NullValue {
		return nil, nil
	}
	native, err := val.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, fmt.Errorf("%s is no JSON value", val.Type().TypeName())
	}
	return native.(*structpb.Value).AsInterface(), nil
}
