// Package cozyapi stands in for cozystack-api, the aggregated apiserver that serves the
// platform's apps (apps.cozystack.io/v1alpha1 Tenant and Kubernetes) as views of the Flux
// HelmReleases it keeps for them (cozystack/cozystack main 3c780ac
// pkg/registry/apps/application/rest.go). What a client sees is what cozystack-api shows:
//
//   - an app is its HelmRelease <prefix><name> (prefix kubernetes- or tenant-, from the
//     ApplicationDefinitions packages/system/{kubernetes,tenant}-rd/cozyrds/*.yaml), labelled
//     apps.cozystack.io/application.{kind,group,name};
//   - its uid and resourceVersion are the HelmRelease's; it has no metadata.generation
//     (rest.go:1340-1362);
//   - its spec is the HelmRelease's spec.values without the platform's internal keys ("_...");
//   - its status is version (lastAttemptedRevision), the HelmRelease's Ready and Released
//     conditions copied verbatim, and for a Tenant its namespace (rest.go:1345-1470); there is no
//     observedGeneration;
//   - a write is authorized against the app's own resource and then made to the HelmRelease.
//
// The stand-in serves the app paths in front of the management apiserver (the sim's proxy routes
// them here); discovery still comes from the apps.cozystack.io CRDs the sim installs, whose own
// storage stays empty.
package cozyapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Group and version of the apps.
const (
	Group   = "apps.cozystack.io"
	Version = "v1alpha1"
)

// Labels cozystack-api puts on an app's HelmRelease (pkg/apis/apps/v1alpha1/types.go:26-28), and
// the prefix of the app's own labels and annotations there (rest.go:77-78).
const (
	LabelKind        = "apps.cozystack.io/application.kind"
	LabelGroup       = "apps.cozystack.io/application.group"
	LabelName        = "apps.cozystack.io/application.name"
	LabelPrefix      = "apps.cozystack.io-"
	AnnotationPrefix = "apps.cozystack.io-"
)

// Kind is one app kind the stand-in serves.
type Kind struct {
	Kind, Resource, Prefix string
	// ChartRef is the ApplicationDefinition's release.chartRef.
	ChartRef map[string]any
	// DisableWait is the release's install and upgrade disableWait.
	DisableWait bool
}

// Kinds are the apps the harness drives.
var Kinds = []Kind{
	{Kind: "Kubernetes", Resource: "kuberneteses", Prefix: "kubernetes-",
		ChartRef: map[string]any{"kind": "ExternalArtifact", "name": "cozystack-kubernetes-application-kubevirt-kubernetes", "namespace": "cozy-system"},
		// packages/system/kubernetes-rd/cozyrds/kubernetes.yaml lines 18-43 (Cozystack v1.6.1):
		// install and upgrade without wait.
		DisableWait: true},
	{Kind: "Tenant", Resource: "tenants", Prefix: "tenant-",
		ChartRef: map[string]any{"kind": "ExternalArtifact", "name": "cozystack-tenant-application-default-tenant", "namespace": "cozy-system"}},
}

var helmReleases = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}

// Server answers the app paths; every other request goes to Next.
type Server struct {
	// Admin reaches the management apiserver as cozystack-api's own identity.
	Admin *rest.Config
	Next  http.Handler
	// Log hears which renders each Kubernetes app created (simenv.RendererLabel); nil: nothing.
	Log io.Writer
	// PostRenderers are Flux post-renderers (helm-controller's spec.postRenderers) the
	// HelmRelease of every Kubernetes app the real chart renders carries: how a lane changes what
	// the chart renders, in the release for all to see (nil: none).
	PostRenderers []any

	dyn dynamic.Interface
}

// New builds a Server.
func New(admin *rest.Config, next http.Handler) (*Server, error) {
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	return &Server{Admin: admin, Next: next, dyn: dyn}, nil
}

// request is one app request, parsed from its path.
type request struct {
	kind      Kind
	namespace string
	name      string // "" for collection requests
	status    bool   // the status subresource
}

// parse reads /apis/apps.cozystack.io/v1alpha1/[namespaces/<ns>/]<resource>[/<name>[/status]].
func parse(path string) (request, bool) {
	rest, ok := strings.CutPrefix(path, "/apis/"+Group+"/"+Version+"/")
	if !ok {
		return request{}, false
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	var r request
	if len(parts) >= 2 && parts[0] == "namespaces" {
		r.namespace, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 {
		return request{}, false
	}
	for _, k := range Kinds {
		if k.Resource == parts[0] {
			r.kind = k
		}
	}
	if r.kind.Kind == "" {
		return request{}, false
	}
	switch len(parts) {
	case 1:
	case 2:
		r.name = parts[1]
	case 3:
		if parts[2] != "status" {
			return request{}, false
		}
		r.name, r.status = parts[1], true
	default:
		return request{}, false
	}
	return r, true
}

// ServeHTTP serves an app request, or passes the request on.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := parse(r.URL.Path)
	if !ok {
		s.Next.ServeHTTP(w, r)
		return
	}
	verb := verbOf(r, req)
	if err := s.authorize(r, req, verb); err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	var out any
	var err error
	switch verb {
	case "get":
		out, err = s.get(ctx, req)
	case "list":
		out, err = s.list(ctx, req, r)
	case "watch":
		s.watch(w, r, req)
		return
	case "create":
		out, err = s.create(ctx, req, r)
	case "update":
		out, err = s.update(ctx, req, r)
	case "patch":
		out, err = s.patch(ctx, req, r)
	case "delete":
		out, err = s.delete(ctx, req, r)
	default:
		err = apierrors.NewMethodNotSupported(schema.GroupResource{Group: Group, Resource: req.kind.Resource}, verb)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	code := http.StatusOK
	if verb == "create" {
		code = http.StatusCreated
	}
	writeJSON(w, code, out)
}

func verbOf(r *http.Request, req request) string {
	switch r.Method {
	case http.MethodGet:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			return "watch"
		case req.name == "":
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(r.Method)
}

// authorize asks the management apiserver whether the caller (its own token and impersonation
// headers) may do verb on the app, as the aggregator authorizes a request before it reaches
// cozystack-api. A status write is refused outright: cozystack-api computes status.
func (s *Server) authorize(r *http.Request, req request, verb string) error {
	gr := schema.GroupResource{Group: Group, Resource: req.kind.Resource}
	if req.status && verb != "get" {
		return apierrors.NewMethodNotSupported(gr, verb+" status")
	}
	cfg := rest.AnonymousClientConfig(s.Admin)
	if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
		cfg.BearerToken = strings.TrimPrefix(auth, "Bearer ")
	}
	if u := r.Header.Get("Impersonate-User"); u != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: u, Groups: r.Header.Values("Impersonate-Group")}
	}
	caller, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	review, err := caller.AuthorizationV1().SelfSubjectAccessReviews().Create(r.Context(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: req.namespace, Verb: verb, Group: Group, Resource: req.kind.Resource, Name: req.name,
		}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if !review.Status.Allowed {
		return apierrors.NewForbidden(gr, req.name, fmt.Errorf("%s", orText(review.Status.Reason, "no RBAC rule allows it")))
	}
	return nil
}

func (s *Server) releases(ns string) dynamic.ResourceInterface {
	return s.dyn.Resource(helmReleases).Namespace(ns)
}

func (s *Server) get(ctx context.Context, req request) (any, error) {
	hr, err := s.releases(req.namespace).Get(ctx, req.kind.Prefix+req.name, metav1.GetOptions{})
	if err != nil || !isApp(hr, req.kind) {
		return nil, notFound(req, err)
	}
	return s.toApp(ctx, hr, req.kind), nil
}

func isApp(hr *unstructured.Unstructured, k Kind) bool {
	l := hr.GetLabels()
	return l[LabelKind] == k.Kind && l[LabelGroup] == Group
}

func notFound(req request, err error) error {
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: Group, Resource: req.kind.Resource}, req.name)
}

// asApp renames a HelmRelease error (conflict, already exists) after the app.
func asApp(err error, req request, name string) error {
	gr := schema.GroupResource{Group: Group, Resource: req.kind.Resource}
	switch {
	case apierrors.IsAlreadyExists(err):
		return apierrors.NewAlreadyExists(gr, name)
	case apierrors.IsConflict(err):
		return apierrors.NewConflict(gr, name, err)
	case apierrors.IsNotFound(err):
		return apierrors.NewNotFound(gr, name)
	}
	return err
}

func readApp(r *http.Request) (*unstructured.Unstructured, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	app := &unstructured.Unstructured{}
	if err := app.UnmarshalJSON(body); err != nil {
		return nil, apierrors.NewBadRequest("the app does not decode: " + err.Error())
	}
	return app, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := apierrors.APIStatus(nil)
	if se, ok := err.(apierrors.APIStatus); ok {
		status = se
	} else {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, int(st.Code), st)
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
