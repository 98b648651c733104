package kind

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// The preflight downloads a manifest source and verifies it against its sha256 before
// anything is created: a changed asset and an unreadable URL are each named, a matching one is
// kept for the components phase, which applies exactly those bytes.
func TestPreflightVerifiesTheManifestSource(t *testing.T) {
	body := "apiVersion: v1\nkind: Namespace\nmetadata: {name: cozy-system}\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cozystack-operator-generic.yaml" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	sum := sha256.Sum256([]byte(body))
	good := "sha256:" + hex.EncodeToString(sum[:])
	wrong := "sha256:" + strings.Repeat("b", 64)
	// httptest serves http and a manifest source takes https only: each case resolves an https
	// source, then points it at the test server.
	for _, c := range []struct {
		name, url, digest, want string
		ok                      bool
	}{
		{"verified", srv.URL + "/cozystack-operator-generic.yaml", good, "operator manifest " + srv.URL + "/cozystack-operator-generic.yaml, " + good + " verified", true},
		{"changed", srv.URL + "/cozystack-operator-generic.yaml", wrong, "sha256 is " + good + ", the platform source pins " + wrong + "; the asset changed or the pin is wrong", false},
		{"unreadable", srv.URL + "/missing.yaml", good, "the server answered 404 Not Found", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := pinned(t, "kubernetes")
			l.Platform.Source = "manifest:https://example.invalid/cozystack-operator-generic.yaml@" + c.digest
			s, err := New(l, Options{Options: substrate.Options{WorkDir: t.TempDir()}, Host: fakeHost()})
			if err != nil {
				t.Fatal(err)
			}
			src, err := install.ResolvePlatformSource(l, "")
			if err != nil {
				t.Fatal(err)
			}
			src.Location = c.url
			s.source = &src
			f := s.fetchPlatform(context.Background(), src)
			if f.OK != c.ok || !strings.Contains(f.Detail, c.want) {
				t.Fatalf("finding %+v, want ok %t and %q", f, c.ok, c.want)
			}
			if c.ok && (s.manifest == nil || s.manifest.SHA256 != good) {
				t.Fatalf("kept %+v", s.manifest)
			}
		})
	}
}

// A checkout source is checked in the preflight (here: no registry), then built in the
// components phase with the checkout's own targets, its image loaded with the kind loader, and
// the run records the folder, commit, image and both digests in substrate/platform.json.
func TestCheckoutSourceIsCheckedThenBuiltAndRecorded(t *testing.T) {
	dir := t.TempDir()
	for path, content := range map[string]string{
		"Makefile":                         "manifests:\n\tmkdir -p _out/assets\n",
		"packages/core/installer/Makefile": "image-operator:\n\tdocker buildx build\nimage-packages:\n\tflux push artifact\n",
	} {
		mustWrite(t, filepath.Join(dir, path), content)
	}
	asset, err := os.ReadFile(filepath.Join("..", "..", "install", "testdata", install.OperatorAsset))
	if err != nil {
		t.Fatal(err)
	}
	const reg = "registry.local:5000/cozystack"
	run := &recordingRunner{out: map[string]string{"git rev-parse HEAD": "fedcba9876543210fedcba9876543210fedcba98\n"}, onManifests: func() {
		mustWrite(t, filepath.Join(dir, "_out", "assets", install.OperatorAsset), strings.Replace(string(asset),
			"--install-crds=true]", "--install-crds=true, --platform-source-url=oci://"+reg+"/cozystack-packages]", 1))
	}}
	var loaded []string
	l := pinned(t, "kubernetes")
	art := t.TempDir()
	opts := Options{Options: substrate.Options{WorkDir: t.TempDir(), Artifacts: art}, Host: fakeHost(), PlatformSource: "checkout:" + dir, runner: run,
		loader: func(_ context.Context, images []string) error { loaded = append(loaded, images...); return nil }}
	s, err := New(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	if f := s.checkPlatform(context.Background()); f.OK || !strings.Contains(f.Detail, "E2E_PLATFORM_REGISTRY is not set") {
		t.Fatalf("no registry: %+v", f)
	}
	s.opts.PlatformRegistry = reg
	if f := s.checkPlatform(context.Background()); !f.OK {
		t.Fatalf("checkout refused: %+v", f)
	}
	m, err := s.platformManifest(context.Background(), *s.source)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 1 || loaded[0] != reg+"/cozystack-operator:e2e-fedcba987654" {
		t.Fatalf("loaded %v", loaded)
	}
	rec, err := install.ReadPlatformRecord(art)
	if err != nil || rec == nil {
		t.Fatalf("record: %v %v", rec, err)
	}
	if rec.Kind != "checkout" || rec.Checkout != dir || rec.CheckoutCommit != "fedcba9876543210fedcba9876543210fedcba98" || rec.ManifestSHA256 != m.SHA256 ||
		rec.RenderedSHA256 == "" || rec.OperatorImage != loaded[0] || rec.Pinned != "" {
		t.Fatalf("record %+v", rec)
	}
}

type recordingRunner struct {
	out         map[string]string
	onManifests func()
	ran         []string
}

func (r *recordingRunner) LookPath(name string) (string, error) { return "/usr/bin/" + name, nil }

func (r *recordingRunner) Run(_ context.Context, _ string, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.ran = append(r.ran, line)
	if strings.HasSuffix(line, " manifests") {
		r.onManifests()
	}
	if out, ok := r.out[line]; ok {
		return []byte(out), nil
	}
	return []byte(fmt.Sprintf("ran %s\n", line)), nil
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
