package node_test

import (
	"archive/tar"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cozystack/cozy-e2e/internal/sim/node"
)

// A root filesystem packed into an image layout keeps its files, modes, symlinks, hard links and
// (as root) file capabilities, leaves what is under /dev, /proc and /sys out, and is served by the
// local registry from the layout's own files: the layer a client pulls is the layout's blob.
func TestPackedRootfsIsServedFromItsLayout(t *testing.T) {
	root := t.TempDir()
	mk := func(p string, mode os.FileMode, content string) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("usr/bin/tool", 0o755, "#!/bin/sh\necho tool\n")
	mk("usr/bin/suid", os.ModeSetuid|0o755, "suid")
	mk("dev/junk", 0o644, "not packed")
	mk("proc/1/status", 0o644, "not packed")
	if err := os.Link(filepath.Join(root, "usr/bin/tool"), filepath.Join(root, "usr/bin/tool2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../run", filepath.Join(root, "var-run")); err != nil {
		t.Fatal(err)
	}
	// cap_net_bind_service+ep as setcap writes it (VFS_CAP_REVISION_2).
	capv := string([]byte{0, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	asRoot := os.Geteuid() == 0
	if asRoot {
		if err := syscall.Setxattr(filepath.Join(root, "usr/bin/tool"), "security.capability", []byte(capv), 0); err != nil {
			t.Fatal(err)
		}
	}

	out := filepath.Join(t.TempDir(), "layout")
	dig, err := node.PackRootfs(root, out, v1.Config{Entrypoint: []string{"/usr/bin/tool"}, User: "107"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := node.LayoutImage(out)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d != dig {
		t.Errorf("layout image digest %s, PackRootfs said %s", d, dig)
	}

	ctx := context.Background()
	r, err := node.StartRegistry(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	const ref = "quay.io/kubevirt/virt-launcher:v1.8.4"
	if _, err := r.PushLayout(ctx, ref, out); err != nil {
		t.Fatal(err)
	}
	local, _ := name.ParseReference(r.Host+"/kubevirt/virt-launcher:v1.8.4", name.Insecure)
	got, err := remote.Image(local, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := got.ConfigFile()
	if err != nil || cf.Config.User != "107" || len(cf.Config.Entrypoint) != 1 {
		t.Fatalf("pulled config %+v (%v)", cf, err)
	}
	layers, err := got.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
	}
	rc.Close()
	check := func(name string, ok func(h *tar.Header) bool, want string) {
		t.Helper()
		if h := entries[name]; h == nil || !ok(h) {
			t.Errorf("layer entry %s: %+v, want %s", name, h, want)
		}
	}
	check("usr/bin/tool", func(h *tar.Header) bool { return h.Typeflag == tar.TypeReg && h.Mode&0o777 == 0o755 }, "a 0755 file")
	check("usr/bin/suid", func(h *tar.Header) bool { return h.Mode&0o4000 != 0 }, "setuid kept")
	check("usr/bin/tool2", func(h *tar.Header) bool { return h.Typeflag == tar.TypeLink && h.Linkname == "usr/bin/tool" }, "a hard link to usr/bin/tool")
	check("var-run", func(h *tar.Header) bool { return h.Typeflag == tar.TypeSymlink && h.Linkname == "../run" }, "a relative symlink")
	check("dev/", func(h *tar.Header) bool { return h.Typeflag == tar.TypeDir }, "the folder, empty")
	for _, n := range []string{"dev/junk", "proc/1/", "proc/1/status"} {
		if entries[n] != nil {
			t.Errorf("layer carries %s: what is under /dev, /proc and /sys stays out", n)
		}
	}
	if asRoot {
		check("usr/bin/tool", func(h *tar.Header) bool { return h.PAXRecords["SCHILY.xattr.security.capability"] == capv }, "its file capability")
	}

	// Served from the layout's file: without it, the registry has no such blob.
	ld, _ := layers[0].Digest()
	blob := filepath.Join(out, "blobs", ld.Algorithm, ld.Hex)
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Head("http://" + r.Host + "/v2/kubevirt/virt-launcher/blobs/" + ld.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("after its layout file went, the layer answers %d, want 404 (it was copied into the registry)", resp.StatusCode)
	}
}
