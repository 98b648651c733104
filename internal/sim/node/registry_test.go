package node_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cozystack/cozy-e2e/internal/sim/node"
)

// An image built here, pushed under the name a Pod uses, is served by the local registry at the
// path containerd asks a mirror for (/v2/<repository>/manifests/<tag>), with the same digest and
// configuration; the mirror entry sends that registry host to it and nowhere else.
func TestRegistryServesImagesUnderTheirNames(t *testing.T) {
	ctx := context.Background()
	r, err := node.StartRegistry(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	img, err := node.FileImage([]node.File{{Path: "bin/hello", Mode: 0o755, Content: []byte("#!hello\n")}},
		v1.Config{Entrypoint: []string{"/bin/hello"}, User: "65535:65535"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"registry.k8s.io/pause:3.10.1", "docker.io/library/busybox:1.37"} {
		dig, err := r.Push(ctx, ref, img)
		if err != nil {
			t.Fatal(err)
		}
		repo := strings.TrimPrefix(strings.SplitN(ref, ":", 2)[0], "registry.k8s.io/")
		repo = strings.TrimPrefix(repo, "docker.io/")
		tag := strings.SplitN(ref, ":", 2)[1]
		// What containerd asks a mirror for, with the ns parameter it adds (docs/hosts.md).
		req, _ := http.NewRequestWithContext(ctx, http.MethodHead, "http://"+r.Host+"/v2/"+repo+"/manifests/"+tag+"?ns=x", nil)
		req.Header.Set("Accept", "application/vnd.docker.distribution.manifest.v2+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != dig.String() {
			t.Errorf("%s: HEAD /v2/%s/manifests/%s answered %d digest %q, want 200 %s", ref, repo, tag, resp.StatusCode, resp.Header.Get("Docker-Content-Digest"), dig)
		}
		local, err := name.ParseReference(r.Host+"/"+repo+":"+tag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Image(local, remote.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		cf, err := got.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != "65535:65535" || len(cf.Config.Entrypoint) != 1 || cf.OS != "linux" {
			t.Errorf("%s: pulled config %+v", ref, cf.Config)
		}
	}
	// An unknown name is not found: the registry serves only what was built here.
	resp, err := http.Get("http://" + r.Host + "/v2/pause/manifests/3.9")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an image never pushed answered %d, want 404", resp.StatusCode)
	}

	dir := t.TempDir()
	if err := r.WriteMirrors(dir); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"registry.k8s.io", "docker.io"} {
		data, err := os.ReadFile(filepath.Join(dir, ns, "hosts.toml"))
		if err != nil {
			t.Fatal(err)
		}
		want := "server = \"http://" + r.Host + "\"\n\n[host.\"http://" + r.Host + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
		if !strings.HasSuffix(string(data), want) {
			t.Errorf("%s/hosts.toml:\n%s\nwant it to end with:\n%s", ns, data, want)
		}
	}
}

// A registry told to refuse a repository's manifest once answers its next manifest request 503
// and counts it, then serves it again; other repositories are not refused.
func TestRegistryRefusesAManifestOnce(t *testing.T) {
	ctx := context.Background()
	r, err := node.StartRegistry(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	img, err := node.FileImage([]node.File{{Path: "disk/disk.img", Mode: 0o644, Content: []byte("disk")}}, v1.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"cozy-e2e.local/worker-disk:latest", "cozy-e2e.local/other:latest"} {
		if _, err := r.Push(ctx, ref, img); err != nil {
			t.Fatal(err)
		}
	}
	r.RefuseManifests(node.WorkerDiskRepo, 1)
	get := func(repo string) int {
		resp, err := http.Get("http://" + r.Host + "/v2/" + repo + "/manifests/latest")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("other"); got != http.StatusOK {
		t.Errorf("another repository's manifest: %d, want 200", got)
	}
	if got := get(node.WorkerDiskRepo); got != http.StatusServiceUnavailable {
		t.Errorf("the refused manifest, first request: %d, want 503", got)
	}
	if got := get(node.WorkerDiskRepo); got != http.StatusOK {
		t.Errorf("the refused manifest, second request: %d, want 200", got)
	}
	if n := r.Refused(node.WorkerDiskRepo); n != 1 {
		t.Errorf("Refused = %d, want 1", n)
	}
}
