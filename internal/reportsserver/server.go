// Package reportsserver is `charter reports-server`: an aggregated API
// server (k8s.io/apiserver) serving wgpolicyk8s.io/v1alpha2 PolicyReport and
// ClusterPolicyReport and openreports.io/v1alpha1 Report and ClusterReport
// from PostgreSQL (internal/reportsstore), registered with kube-apiserver
// by APIServices, so that reports leave etcd while every client (kubectl,
// charter's controllers, Policy Reporter) keeps using the same API.
//
// Each resource is a generic registry Store (the REST storage kube-apiserver
// serves its own resources and custom resources with) over the PostgreSQL
// storage, validated by the resource's CRD schema and printed with its
// CRD's columns. Authentication and authorisation are delegated to
// kube-apiserver, as for any aggregated API server.
package reportsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"
	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	netutils "k8s.io/utils/net"

	"github.com/charter-dev/charter/internal/reportsstore"
)

// DSNEnv names the environment variable holding the PostgreSQL DSN when
// --postgres-dsn is not given (the Helm chart sets it from a Secret).
const DSNEnv = "CHARTER_POSTGRES_DSN"

// Options configure the server.
type Options struct {
	// DSN is the PostgreSQL connection string.
	DSN string
	// EventRetention is how long writes stay replayable to watches; a
	// watch or a continued list from an older resourceVersion gets 410
	// Gone and lists again.
	EventRetention time.Duration
	// Kubeconfig, when set, is the kube-apiserver authentication and
	// authorisation are delegated to (else the in-cluster one).
	Kubeconfig string
	// ServingNames are extra DNS names of the self-signed serving
	// certificate made when none is given (the Service's name in the
	// cluster: <service>.<namespace>.svc).
	ServingNames []string

	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
}

// NewOptions returns the defaults: port 8443, 15 minutes of events kept,
// delegated authentication and authorisation.
func NewOptions() *Options {
	o := &Options{
		EventRetention: 15 * time.Minute,
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
	}
	o.SecureServing.BindPort = 8443
	o.SecureServing.ServerCert.PairName = "charter-reports-server"
	return o
}

// AddFlags adds the options' flags to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DSN, "postgres-dsn", "", "PostgreSQL connection string (URL or key=value); default $"+DSNEnv)
	fs.DurationVar(&o.EventRetention, "event-retention", o.EventRetention,
		"how long writes stay replayable to watches; older resourceVersions get 410 Gone")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the kube-apiserver that authenticates and authorises requests (default: in-cluster)")
	fs.StringSliceVar(&o.ServingNames, "serving-name", nil, "DNS name of the self-signed serving certificate (repeatable)")
	o.SecureServing.AddFlags(fs)
	o.Authentication.AddFlags(fs)
	o.Authorization.AddFlags(fs)
}

// Server is a prepared reports server.
type Server struct {
	db       *reportsstore.DB
	prepared interface{ RunWithContext(context.Context) error }
	port     int
	caBundle []byte
	opts     *Options
}

// New connects to PostgreSQL and prepares the server; Run serves.
func (o *Options) New(ctx context.Context) (*Server, error) {
	dsn := o.DSN
	if dsn == "" {
		dsn = os.Getenv(DSNEnv)
	}
	if dsn == "" {
		return nil, fmt.Errorf("no PostgreSQL DSN: set --postgres-dsn or $%s", DSNEnv)
	}
	if o.EventRetention <= 0 {
		return nil, fmt.Errorf("--event-retention %s: must be positive", o.EventRetention)
	}
	if o.Kubeconfig != "" {
		o.Authentication.RemoteKubeConfigFile = o.Kubeconfig
		o.Authorization.RemoteKubeConfigFile = o.Kubeconfig
	}
	names := append([]string{"localhost"}, o.ServingNames...)
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts(names[0], names[1:], []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("making a self-signed serving certificate: %w", err)
	}

	resources, err := loadResources()
	if err != nil {
		return nil, err
	}
	cfg := genericapiserver.NewRecommendedConfig(Codecs)
	cfg.Serializer = serving
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	// kube-apiserver holds watches open through the server (its garbage
	// collector's, informers'): end them on stop rather than wait the
	// default minute (the request timeout) for them.
	cfg.ShutdownWatchTerminationGracePeriod = 2 * time.Second
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, err
	}
	if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("delegating authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("delegating authorisation: %w", err)
	}
	namer := openapi.NewDefinitionNamer(Scheme)
	defs := openAPIDefinitions(resources)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(defs, namer)
	cfg.OpenAPIConfig.Info.Title = "charter reports-server"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(defs, namer)
	cfg.OpenAPIV3Config.Info.Title = "charter reports-server"

	db, err := reportsstore.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	generic, err := cfg.Complete().New("charter-reports-server", genericapiserver.NewEmptyDelegate())
	if err != nil {
		db.Close()
		return nil, err
	}
	generic.ShutdownTimeout = 5 * time.Second
	if err := installResources(generic, db, resources); err != nil {
		db.Close()
		return nil, err
	}
	generic.AddReadyzChecks(dbCheck{db})

	s := &Server{db: db, prepared: generic.PrepareRun(), opts: o}
	if l := cfg.SecureServing.Listener; l != nil {
		if addr, ok := l.Addr().(*net.TCPAddr); ok {
			s.port = addr.Port
		}
	}
	if certFile := o.SecureServing.ServerCert.CertKey.CertFile; certFile != "" {
		if s.caBundle, err = os.ReadFile(certFile); err != nil {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

// Port is the port the server listens on.
func (s *Server) Port() int { return s.port }

// CABundle is the serving certificate (self-signed: its own CA) when the
// server made or was given it as a file: the APIServices' caBundle.
func (s *Server) CABundle() []byte { return s.caBundle }

// DB is the server's database.
func (s *Server) DB() *reportsstore.DB { return s.db }

// Run serves until ctx ends, compacting the events as it goes.
func (s *Server) Run(ctx context.Context) error {
	defer s.db.Close()
	go s.db.RunCompaction(ctx, s.opts.EventRetention/4, s.opts.EventRetention)
	return s.prepared.RunWithContext(ctx)
}

// installResources installs one API group per report group, a generic
// registry Store per resource.
func installResources(server *genericapiserver.GenericAPIServer, db *reportsstore.DB, resources []*resource) error {
	groups := map[string]*genericapiserver.APIGroupInfo{}
	var order []string
	for _, res := range resources {
		info, ok := groups[res.gvr.Group]
		if !ok {
			g := genericapiserver.NewDefaultAPIGroupInfo(res.gvr.Group, Scheme, metav1.ParameterCodec, Codecs)
			g.NegotiatedSerializer = serving
			info = &g
			groups[res.gvr.Group] = info
			order = append(order, res.gvr.Group)
		}
		store, err := newREST(db, res)
		if err != nil {
			return err
		}
		if info.VersionedResourcesStorageMap[res.gvr.Version] == nil {
			info.VersionedResourcesStorageMap[res.gvr.Version] = map[string]rest.Storage{}
		}
		info.VersionedResourcesStorageMap[res.gvr.Version][res.gvr.Resource] = store
	}
	for _, group := range order {
		if err := server.InstallAPIGroup(groups[group]); err != nil {
			return fmt.Errorf("installing %s: %w", group, err)
		}
	}
	return nil
}

// REST is a resource's REST storage: the generic registry Store, with the
// CRD's short names and categories for discovery (kubectl get polr).
type REST struct {
	*genericregistry.Store
	shortNames, categories []string
}

func (r *REST) ShortNames() []string { return r.shortNames }
func (r *REST) Categories() []string { return r.categories }

var (
	_ rest.ShortNamesProvider = (*REST)(nil)
	_ rest.CategoriesProvider = (*REST)(nil)
)

func newREST(db *reportsstore.DB, res *resource) (*REST, error) {
	table, err := tableconvertor.New(res.columns)
	if err != nil {
		return nil, fmt.Errorf("%s printer columns: %w", res.gvr, err)
	}
	st := newStrategy(res)
	store := &genericregistry.Store{
		NewFunc:                   res.newFunc,
		NewListFunc:               res.newListFunc,
		DefaultQualifiedResource:  res.gvr.GroupResource(),
		SingularQualifiedResource: schema.GroupResource{Group: res.gvr.Group, Resource: res.singular},
		CreateStrategy:            st,
		UpdateStrategy:            st,
		DeleteStrategy:            st,
		TableConvertor:            table,
	}
	getter := restOptionsGetter{db: db, codec: Codecs.LegacyCodec(res.gvr.GroupVersion())}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: getter}); err != nil {
		return nil, fmt.Errorf("%s storage: %w", res.gvr, err)
	}
	return &REST{Store: store, shortNames: res.shortNames, categories: res.categories}, nil
}

// restOptionsGetter gives every resource the PostgreSQL storage, under the
// key prefix /<group>/<resource>.
type restOptionsGetter struct {
	db    *reportsstore.DB
	codec runtime.Codec
}

func (g restOptionsGetter) GetRESTOptions(resource schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	return generic.RESTOptions{
		StorageConfig: &storagebackend.ConfigForResource{
			Config:        storagebackend.Config{Codec: g.codec},
			GroupResource: resource,
		},
		Decorator:               g.decorate,
		EnableGarbageCollection: true,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          "/" + resource.Group + "/" + resource.Resource,
	}, nil
}

func (g restOptionsGetter) decorate(config *storagebackend.ConfigForResource, resourcePrefix string,
	_ func(runtime.Object) (string, error), newFunc, newListFunc func() runtime.Object,
	_ storage.AttrFunc, _ storage.IndexerFuncs, _ *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
	return g.db.NewStore(resourcePrefix, config.Codec, newFunc, newListFunc), func() {}, nil
}

// openAPIDefinitions are the definitions of the meta types (from
// apiextensions-apiserver's generated ones) and of the report types, from
// their CRDs' schemas.
func openAPIDefinitions(resources []*resource) common.GetOpenAPIDefinitions {
	return func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		defs := apiextensionsopenapi.GetOpenAPIDefinitions(ref)
		for _, res := range resources {
			s, err := res.openAPISchema(ref)
			if err != nil {
				// loadResources read the same schema: not reachable.
				panic(fmt.Sprintf("%s schema: %v", res.gvr, err))
			}
			// The group-version-kind extension is what server-side apply's
			// type converter finds an object's schema by.
			s.AddExtension("x-kubernetes-group-version-kind", gvkExtension(res.gvr.GroupVersion().WithKind(res.kind)))
			defs[goName(res.newFunc())] = common.OpenAPIDefinition{Schema: s, Dependencies: []string{objectMetaName}}
			defs[goName(res.newListFunc())] = common.OpenAPIDefinition{
				Schema: spec.Schema{VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{
					"x-kubernetes-group-version-kind": gvkExtension(res.gvr.GroupVersion().WithKind(res.kind + "List")),
				}}, SchemaProps: spec.SchemaProps{
					Type:     []string{"object"},
					Required: []string{"items"},
					Properties: map[string]spec.Schema{
						"apiVersion": {SchemaProps: spec.SchemaProps{Type: []string{"string"}}},
						"kind":       {SchemaProps: spec.SchemaProps{Type: []string{"string"}}},
						"metadata":   {SchemaProps: spec.SchemaProps{Ref: ref(listMetaName)}},
						"items": {SchemaProps: spec.SchemaProps{
							Type:  []string{"array"},
							Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(goName(res.newFunc()))}}},
						}},
					},
				}},
				Dependencies: []string{listMetaName, goName(res.newFunc())},
			}
		}
		return defs
	}
}

func gvkExtension(gvk schema.GroupVersionKind) []any {
	return []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}}
}

// dbCheck is the readiness check of the database.
type dbCheck struct{ db *reportsstore.DB }

func (dbCheck) Name() string { return "postgres" }
func (c dbCheck) Check(r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := c.db.Pool().Ping(ctx); err != nil {
		return errors.New("PostgreSQL does not answer: " + err.Error())
	}
	return nil
}
