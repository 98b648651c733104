package realupstream

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// Artifact is a chart archive a ChartServer serves, with the fields an ExternalArtifact's
// status.artifact carries (source-controller v1.9.0 config/crd/bases/
// source.toolkit.fluxcd.io_externalartifacts.yaml: digest, lastUpdateTime, path, revision and
// url required; size optional).
type Artifact struct {
	URL      string
	Path     string
	Digest   string // sha256:<hex> of the archive; helm-controller checks it on download
	Revision string
	Size     int64
}

// ChartServer serves chart archives over HTTP on loopback, as source-controller serves the
// artifacts it stores, so helm-controller can fetch a chart an ExternalArtifact points at.
type ChartServer struct {
	URL  string
	srv  *http.Server
	mu   sync.Mutex
	blob map[string][]byte
	hits map[string]int
}

// StartChartServer listens on a free loopback port until Close.
func StartChartServer() (*ChartServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &ChartServer{URL: "http://" + ln.Addr().String(), blob: map[string][]byte{}, hits: map[string]int{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *ChartServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, ok := s.blob[r.URL.Path]
	if ok {
		s.hits[r.URL.Path]++
	}
	s.mu.Unlock()
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	http.ServeContent(w, r, path.Base(r.URL.Path), time.Time{}, bytes.NewReader(data))
}

// Close stops serving.
func (s *ChartServer) Close() { _ = s.srv.Close() }

// Add serves archive under name (<name>/<digest>.tgz, so a new archive never replaces the bytes
// behind an old URL) and returns its artifact.
func (s *ChartServer) Add(name string, archive []byte) Artifact {
	sum := sha256.Sum256(archive)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	p := fmt.Sprintf("%s/%s.tgz", name, hex.EncodeToString(sum[:]))
	s.mu.Lock()
	s.blob["/"+p] = archive
	s.mu.Unlock()
	return Artifact{URL: s.URL + "/" + p, Path: p, Digest: digest, Revision: digest, Size: int64(len(archive))}
}

// Hits is how many times the artifact was fetched.
func (s *ChartServer) Hits(a Artifact) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits["/"+a.Path]
}

// PackChart packs a chart folder as `helm package` lays it out: every file under a top folder
// named after the chart, subcharts under charts/ as folders, and the paths the chart's
// .helmignore names left out. The archive is the same bytes for the same files (sorted, no
// times, no owners), so its digest is a function of the chart.
func PackChart(dir string) ([]byte, error) {
	meta, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("upstream: %s is not a chart: %w", dir, err)
	}
	var chart struct {
		Name string `json:"name"`
	}
	if err := yaml.Unmarshal(meta, &chart); err != nil || chart.Name == "" {
		return nil, fmt.Errorf("upstream: %s/Chart.yaml: no chart name (%v)", dir, err)
	}
	ignore, err := readHelmignore(filepath.Join(dir, ".helmignore"))
	if err != nil {
		return nil, err
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ignore.ignored(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, rel)
		} else if !d.IsDir() {
			return fmt.Errorf("%s is neither a file nor a folder (a symlink? charts/ subcharts must be copies)", p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("upstream: packing %s: %w", dir, err)
	}
	sort.Strings(files)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: chart.Name + "/" + rel, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// helmignore holds the rules of a .helmignore as Helm reads them (helm.sh/helm pkg/ignore): a
// rule starting with "/" matches the path from the chart's root, one ending with "/" only
// folders, one without "/" the base name, others the relative path; .helmignore itself is always
// left out. Negations ("!") are not needed by the charts packed here and are refused.
type helmignore []string

func readHelmignore(p string) (helmignore, error) {
	rules := helmignore{".helmignore"}
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return rules, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			return nil, fmt.Errorf("upstream: %s: negated rule %q is not supported", p, line)
		}
		if _, err := path.Match(strings.Trim(line, "/"), "x"); err != nil {
			return nil, fmt.Errorf("upstream: %s: bad rule %q: %w", p, line, err)
		}
		rules = append(rules, line)
	}
	return rules, nil
}

func (h helmignore) ignored(rel string, dir bool) bool {
	for _, r := range h {
		pattern, onlyDir := strings.CutSuffix(r, "/")
		if onlyDir && !dir {
			continue
		}
		var target string
		switch {
		case strings.HasPrefix(pattern, "/"):
			pattern, target = strings.TrimPrefix(pattern, "/"), rel
		case strings.Contains(pattern, "/"):
			target = rel
		default:
			target = path.Base(rel)
		}
		if ok, _ := path.Match(pattern, target); ok {
			return true
		}
	}
	return false
}

// ExternalArtifactAPIVersion is the Flux source API version of ExternalArtifact.
const ExternalArtifactAPIVersion = "source.toolkit.fluxcd.io/v1"

// PublishExternalArtifact creates (or updates) the ExternalArtifact namespace/name and writes the
// artifact into its status with a Ready condition, as the producer of an ExternalArtifact does;
// helm-controller then reads status.artifact (helm-controller v1.6.2
// internal/controller/helmrelease_controller.go lines 857-865: an ExternalArtifact is ready
// once it has an artifact) and fetches url, checking digest.
func PublishExternalArtifact(ctx context.Context, c *cluster.Cluster, namespace, name string, a Artifact) error {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(ExternalArtifactAPIVersion)
	obj.SetKind("ExternalArtifact")
	obj.SetNamespace(namespace)
	obj.SetName(name)
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		obj.Object["spec"] = map[string]any{}
		if err := c.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("upstream: creating ExternalArtifact %s/%s: %w", namespace, name, err)
		}
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	obj.Object["status"] = map[string]any{
		"artifact": map[string]any{
			"url": a.URL, "path": a.Path, "digest": a.Digest, "revision": a.Revision, "size": a.Size,
			"lastUpdateTime": now,
		},
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Succeeded", "message": "stored artifact for revision '" + a.Revision + "'",
			"lastTransitionTime": now, "observedGeneration": obj.GetGeneration(),
		}},
	}
	if err := c.Client.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("upstream: ExternalArtifact %s/%s status: %w", namespace, name, err)
	}
	return nil
}
