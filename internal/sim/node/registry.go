package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is a real OCI registry served in process on a local address (github.com/google/
// go-containerregistry v0.20.7 pkg/registry: the distribution API; blobs in memory, or read in
// place from the image layouts PushLayout was given, so a large image is not copied). It serves
// the images built here under the names the Pods use: an image pushed as
// registry.k8s.io/pause:3.10.1 is kept as <Host>/pause:3.10.1, and containerd reaches it through
// the mirror entry WriteMirrors writes for registry.k8s.io.
type Registry struct {
	// Host is <address>:<port>, 127.0.0.1 unless started on another address.
	Host string
	srv  *http.Server
	done chan struct{}

	blobs *blobStore

	mu        sync.Mutex
	upstreams map[string]bool
	// refuse counts, per repository, the manifest requests still to refuse; refused those refused.
	refuse, refused map[string]int
}

// StartRegistry serves a registry on a free loopback port; its request log goes to logw.
func StartRegistry(logw io.Writer) (*Registry, error) { return StartRegistryOn("127.0.0.1", logw) }

// StartRegistryOn serves a registry on a free port of address host: the host's own address
// (HostAddress) for clients in the real Node's pods, such as CDI's importer pulling a disk, which
// reach this host there and not on its loopback.
func StartRegistryOn(host string, logw io.Writer) (*Registry, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("local registry: listening on %s: %w", host, err)
	}
	r := &Registry{Host: ln.Addr().String(), done: make(chan struct{}), upstreams: map[string]bool{}, blobs: newBlobStore(),
		refuse: map[string]int{}, refused: map[string]int{}}
	h := registry.New(registry.Logger(log.New(logw, "registry ", log.LstdFlags)), registry.WithBlobHandler(r.blobs))
	r.srv = &http.Server{Handler: r.refusing(h, logw), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln)
	}()
	return r, nil
}

// manifestPath is a distribution API manifest request: /v2/<repository>/manifests/<reference>.
var manifestPath = regexp.MustCompile(`^/v2/(.+)/manifests/[^/]+$`)

// RefuseManifests makes the registry refuse the next n requests for a manifest of repository
// repo (as a Pod names it, without the registry: "worker-disk"), each answered 503 Service
// Unavailable, as a registry behind a proxy answers while it is down; then it serves them again.
func (r *Registry) RefuseManifests(repo string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse[repo] = n
}

// Refused is how many manifest requests of repository repo the registry refused.
func (r *Registry) Refused(repo string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused[repo]
}

func (r *Registry) refusing(next http.Handler, logw io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if m := manifestPath.FindStringSubmatch(req.URL.Path); m != nil {
			r.mu.Lock()
			refuse := r.refuse[m[1]] > 0
			if refuse {
				r.refuse[m[1]]--
				r.refused[m[1]]++
			}
			r.mu.Unlock()
			if refuse {
				fmt.Fprintf(logw, "registry refused %s %s: 503 Service Unavailable\n", req.Method, req.URL.Path)
				http.Error(w, "503 Service Unavailable", http.StatusServiceUnavailable)
				return
			}
		}
		next.ServeHTTP(w, req)
	})
}

// Stop closes the registry.
func (r *Registry) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
	<-r.done
}

// Push stores img under ref (a name as a Pod or a controller writes it, by tag: a digest names
// content built elsewhere, which this registry cannot hold) and returns the digest it got.
func (r *Registry) Push(ctx context.Context, ref string, img v1.Image) (v1.Hash, error) {
	want, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("local registry: %q is not an image name with a tag: %w", ref, err)
	}
	local, err := name.NewTag(r.Host+"/"+want.RepositoryStr()+":"+want.TagStr(), name.Insecure)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Write(local, img, remote.WithContext(ctx)); err != nil {
		return v1.Hash{}, fmt.Errorf("local registry: pushing %s as %s: %w", ref, local, err)
	}
	r.mu.Lock()
	r.upstreams[want.RegistryStr()] = true
	r.mu.Unlock()
	return img.Digest()
}

// PushLayout stores the image of the OCI image layout dir (as PackRootfs writes it) under ref.
// Its blobs are served from the layout's files, not copied: only its manifest is pushed.
func (r *Registry) PushLayout(ctx context.Context, ref, dir string) (v1.Hash, error) {
	img, err := LayoutImage(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	r.blobs.addLayout(dir)
	return r.Push(ctx, ref, img)
}

// Upstreams are the registry hosts of the names pushed so far ("index.docker.io" for docker.io
// names, as go-containerregistry spells it).
func (r *Registry) Upstreams() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for h := range r.upstreams {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// MirroredHosts are the registry hosts this registry stands for, as a mirror configuration
// names them: Upstreams, with "docker.io" for go-containerregistry's index.docker.io.
func (r *Registry) MirroredHosts() []string {
	var out []string
	for _, up := range r.Upstreams() {
		if up == name.DefaultRegistry {
			up = "docker.io"
		}
		out = append(out, up)
	}
	return out
}

// WriteMirrors writes one hosts.toml per upstream registry host under configPath (containerd's
// CRI registry config_path) that sends every pull and resolve of that host to this registry and
// nothing to the upstream: containerd v1.6.20 docs/hosts.md:28-38 (config_path), :141-147 (a
// host namespace folder with its hosts.toml), :160-174 (the mirror as the server too, so no other
// host is asked), :199-204 (server, tried after the hosts); the folder is the host namespace as
// named (remotes/docker/config/config_unix.go:27-37). docker.io names are looked up under
// "docker.io", which go-containerregistry calls index.docker.io.
func (r *Registry) WriteMirrors(configPath string) error {
	for _, ns := range r.MirroredHosts() {
		dir := filepath.Join(configPath, ns)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		toml := fmt.Sprintf("# %s is served by this run's local registry; nothing is pulled from outside.\n"+
			"server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", ns, r.Host, r.Host)
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(toml), 0o644); err != nil {
			return err
		}
	}
	if len(r.Upstreams()) == 0 {
		return errors.New("local registry: no image pushed yet, so no mirror entry to write")
	}
	return nil
}
