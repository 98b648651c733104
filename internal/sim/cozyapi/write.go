package cozyapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// create is an app create: the app becomes its HelmRelease.
func (s *Server) create(ctx context.Context, req request, r *http.Request) (any, error) {
	app, err := readApp(r)
	if err != nil {
		return nil, err
	}
	if app.GetNamespace() == "" {
		app.SetNamespace(req.namespace)
	}
	hr, err := toRelease(app, req.kind, nil)
	if err != nil {
		return nil, err
	}
	s.postRender(hr)
	created, err := s.releases(req.namespace).Create(ctx, hr, metav1.CreateOptions{})
	if err != nil {
		return nil, asApp(err, req, app.GetName())
	}
	if r := created.GetLabels()[simenv.RendererLabel]; r != "" && s.Log != nil {
		fmt.Fprintf(s.Log, "sim: %s %s/%s is rendered by %s\n", req.kind.Kind, app.GetNamespace(), app.GetName(), rendererText(r))
	}
	return s.toApp(ctx, created, req.kind), nil
}

func (s *Server) update(ctx context.Context, req request, r *http.Request) (any, error) {
	app, err := readApp(r)
	if err != nil {
		return nil, err
	}
	return s.write(ctx, req, func(*unstructured.Unstructured) (*unstructured.Unstructured, error) { return app, nil })
}

// patch applies a JSON merge patch to the app as it is and writes the result, as the generic
// apiserver does before it calls cozystack-api's Update.
func (s *Server) patch(ctx context.Context, req request, r *http.Request) (any, error) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, string(types.MergePatchType)) {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
			Reason: metav1.StatusReasonUnsupportedMediaType, Message: "the body of the request was in an unknown format: " + ct + " (the stand-in takes application/merge-patch+json)"}}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	return s.write(ctx, req, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		data, err := json.Marshal(cur.Object)
		if err != nil {
			return nil, err
		}
		merged, err := mergePatch(data, body)
		if err != nil {
			return nil, apierrors.NewBadRequest("merge patch: " + err.Error())
		}
		out := &unstructured.Unstructured{}
		return out, out.UnmarshalJSON(merged)
	})
}

// write reads the app, changes it with change and writes it back to its HelmRelease.
func (s *Server) write(ctx context.Context, req request, change func(*unstructured.Unstructured) (*unstructured.Unstructured, error)) (any, error) {
	hr, err := s.releases(req.namespace).Get(ctx, req.kind.Prefix+req.name, metav1.GetOptions{})
	if err != nil || !isApp(hr, req.kind) {
		return nil, notFound(req, err)
	}
	cur := s.toApp(ctx, hr, req.kind)
	app, err := change(cur)
	if err != nil {
		return nil, err
	}
	if app.GetName() != "" && app.GetName() != req.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", app.GetName(), req.name))
	}
	app.SetName(req.name)
	app.SetNamespace(req.namespace)
	next, err := toRelease(app, req.kind, hr)
	if err != nil {
		return nil, err
	}
	s.postRender(next)
	updated, err := s.releases(req.namespace).Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return nil, asApp(err, req, req.name)
	}
	return s.toApp(ctx, updated, req.kind), nil
}

func (s *Server) delete(ctx context.Context, req request, r *http.Request) (any, error) {
	opts := metav1.DeleteOptions{}
	if body, _ := io.ReadAll(r.Body); len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &opts); err != nil {
			return nil, apierrors.NewBadRequest("delete options: " + err.Error())
		}
	}
	if p := r.URL.Query().Get("propagationPolicy"); p != "" {
		pp := metav1.DeletionPropagation(p)
		opts.PropagationPolicy = &pp
	}
	hr, err := s.releases(req.namespace).Get(ctx, req.kind.Prefix+req.name, metav1.GetOptions{})
	if err != nil || !isApp(hr, req.kind) {
		return nil, notFound(req, err)
	}
	if err := s.releases(req.namespace).Delete(ctx, hr.GetName(), opts); err != nil {
		return nil, asApp(err, req, req.name)
	}
	return metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{Name: req.name, Group: Group, Kind: req.kind.Resource, UID: hr.GetUID()}}, nil
}
