package cozyapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// list is an app list: the kind's HelmReleases in the namespace, each shown as its app.
func (s *Server) list(ctx context.Context, req request, r *http.Request) (any, error) {
	opts, err := listOptions(r, req)
	if err != nil {
		return nil, err
	}
	list, err := s.releases(req.namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	items := []any{}
	for i := range list.Items {
		items = append(items, s.toApp(ctx, &list.Items[i], req.kind).Object)
	}
	return map[string]any{"apiVersion": Group + "/" + Version, "kind": req.kind.Kind + "List",
		"metadata": map[string]any{"resourceVersion": list.GetResourceVersion()}, "items": items}, nil
}

// listOptions turns an app list or watch query into one on the HelmReleases: the kind's labels,
// the caller's label selector on the prefixed labels (rest.go:378), metadata.name on the
// release's name.
func listOptions(r *http.Request, req request) (metav1.ListOptions, error) {
	q := r.URL.Query()
	sel := []string{LabelKind + "=" + req.kind.Kind, LabelGroup + "=" + Group}
	if ls := q.Get("labelSelector"); ls != "" {
		for _, term := range strings.Split(ls, ",") {
			sel = append(sel, LabelPrefix+strings.TrimSpace(term))
		}
	}
	opts := metav1.ListOptions{LabelSelector: strings.Join(sel, ","), ResourceVersion: q.Get("resourceVersion"),
		ResourceVersionMatch: metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")), AllowWatchBookmarks: q.Get("allowWatchBookmarks") == "true",
		Continue: q.Get("continue")}
	if fs := q.Get("fieldSelector"); fs != "" {
		name, ok := strings.CutPrefix(fs, "metadata.name=")
		if !ok || strings.ContainsAny(name, ",=!") {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("field selector %q: only metadata.name=<name> is supported", fs))
		}
		opts.FieldSelector = "metadata.name=" + req.kind.Prefix + name
	}
	if v := q.Get("sendInitialEvents"); v != "" {
		b := v == "true"
		opts.SendInitialEvents = &b
	}
	if v := q.Get("timeoutSeconds"); v != "" {
		var t int64
		if _, err := fmt.Sscan(v, &t); err == nil {
			opts.TimeoutSeconds = &t
		}
	}
	return opts, nil
}

// watch streams the kind's HelmReleases as apps, in the watch stream's JSON framing.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, req request) {
	opts, err := listOptions(r, req)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.name != "" {
		opts.FieldSelector = "metadata.name=" + req.kind.Prefix + req.name
	}
	wi, err := s.releases(req.namespace).Watch(r.Context(), opts)
	if err != nil {
		writeError(w, err)
		return
	}
	defer wi.Stop()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			var obj any
			switch o := ev.Object.(type) {
			case *unstructured.Unstructured:
				if ev.Type == watch.Bookmark {
					o.SetAPIVersion(Group + "/" + Version)
					o.SetKind(req.kind.Kind)
					obj = o.Object
				} else {
					obj = s.toApp(r.Context(), o, req.kind).Object
				}
			case *metav1.Status:
				obj = o
			default:
				obj = ev.Object
			}
			if err := enc.Encode(map[string]any{"type": string(ev.Type), "object": obj}); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}
