package install

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// fakeCheckout is a folder shaped like a cozystack/cozystack checkout: the root Makefile with
// `manifests`, the installer's Makefile with image-operator and image-packages.
func fakeCheckout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "Makefile"), "include hack/common-envs.mk\n\nmanifests:\n\tmkdir -p _out/assets\n\nassets: assets-talos assets-cozypkg openapi-json\n")
	write(t, filepath.Join(dir, "packages/core/installer/Makefile"), "image: pre-checks image-operator image-packages chart\n\nimage-operator:\n\tdocker buildx build\n\nimage-packages:\n\tflux push artifact\n")
	return dir
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Each platform source is accepted or refused on this machine, the refusal saying exactly what
// is missing; nothing here reads the network or builds.
func TestPlatformSources(t *testing.T) {
	l := &lane.Lane{File: "lanes/x.yaml", Platform: &lane.Platform{Source: "release:unknown", Note: "not cut yet"}}
	checkout := fakeCheckout(t)
	manifest := filepath.Join(t.TempDir(), OperatorAsset)
	write(t, manifest, "apiVersion: v1\nkind: Namespace\nmetadata: {name: cozy-system}\n")
	noManifests := fakeCheckout(t)
	write(t, filepath.Join(noManifests, "Makefile"), "assets: assets-talos\n")
	noPackages := fakeCheckout(t)
	write(t, filepath.Join(noPackages, "packages/core/installer/Makefile"), "image-operator:\n\tdocker buildx build\n")
	notCheckout := t.TempDir()

	cases := []struct {
		name, source string
		want         string // "" accepts
	}{
		{"lane unpinned", "", `lanes/x.yaml: platform.source is "release:unknown": no platform release is pinned (not cut yet); set E2E_PLATFORM_SOURCE=release:<version>@sha256:<hex>, manifest:<path or URL>@sha256:<hex> or checkout:<dir>`},
		{"release without digest", "release:v1.6.2", "E2E_PLATFORM_SOURCE release:v1.6.2 has no recorded sha256: Cozystack publishes no checksum for its operator manifests (hack/upload-assets.sh uploads cozypkg-checksums.txt only)"},
		{"release with digest", "release:v1.6.2@" + digestA, ""},
		{"release with a short digest", "release:v1.6.2@sha256:abc", `E2E_PLATFORM_SOURCE: release:v1.6.2@sha256:abc: "sha256:abc" is not sha256:<64 lowercase hex>`},
		{"manifest without digest", "manifest:https://example.org/cozystack-operator-generic.yaml", "has no @sha256:<hex>: a manifest source is applied only at the digest its CI recorded"},
		{"manifest over http", "manifest:http://example.org/m.yaml@" + digestA, `"http://example.org/m.yaml" is neither a file path nor an https:// URL`},
		{"manifest file missing", "manifest:/nowhere/m.yaml@" + digestA, "E2E_PLATFORM_SOURCE: manifest /nowhere/m.yaml: no such file on this machine"},
		{"manifest file", "manifest:" + manifest + "@" + digestA, ""},
		{"manifest URL", "manifest:https://example.org/m.yaml@" + digestA, ""},
		{"checkout missing", "checkout:/nowhere/cozystack", "E2E_PLATFORM_SOURCE: checkout /nowhere/cozystack: no such folder on this machine"},
		{"not a checkout", "checkout:" + notCheckout, "checkout " + notCheckout + ": no Makefile (is it a cozystack/cozystack checkout?)"},
		{"no manifests target", "checkout:" + noManifests, `Makefile has no "manifests" target (it writes _out/assets/cozystack-operator-generic.yaml)`},
		{"no image-packages target", "checkout:" + noPackages, `packages/core/installer/Makefile has no "image-packages" target (it pushes the packages artifact and points values.yaml at it)`},
		{"checkout", "checkout:" + checkout, ""},
		{"bare folder", checkout, ""},
		{"typo", "relase:v1.6.2", `"relase:v1.6.2" is not a platform source`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ResolvePlatformSource(l, c.source)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want %q, got %v (%+v)", c.want, err, s)
			}
		})
	}

	s, err := ResolvePlatformSource(l, "checkout:"+checkout)
	if err != nil || s.OperatorManifest() != filepath.Join(checkout, "_out", "assets", OperatorAsset) || s.Pinned() != "" {
		t.Fatalf("checkout: %+v %v", s, err)
	}
	s, err = ResolvePlatformSource(l, "release:v1.6.2@"+digestA)
	if err != nil || s.OperatorManifest() != "https://github.com/cozystack/cozystack/releases/download/v1.6.2/cozystack-operator-generic.yaml" || s.Pinned() != "release:v1.6.2@"+digestA {
		t.Fatalf("release: %+v %v", s, err)
	}
	// The lane records the digest of the release it pins; an override naming the same release
	// takes it, another release does not.
	l.Platform.Source = "release:v1.6.2@" + digestA
	if s, err := ResolvePlatformSource(l, "release:v1.6.2"); err != nil || s.Digest != digestA {
		t.Fatalf("the lane's digest: %+v %v", s, err)
	}
	if _, err := ResolvePlatformSource(l, "release:v1.6.1"); err == nil || !strings.Contains(err.Error(), "release:v1.6.1 has no recorded sha256") {
		t.Fatalf("another release: %v", err)
	}
}

// fakeRunner is the machine a checkout build runs on: which programs it has, and what each
// command does (by its first words).
type fakeRunner struct {
	have map[string]bool
	ran  []string
	do   map[string]func(dir string, args []string) ([]byte, error)
}

func (f *fakeRunner) LookPath(name string) (string, error) {
	if f.have[name] {
		return "/usr/bin/" + name, nil
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

func (f *fakeRunner) Run(_ context.Context, dir string, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	f.ran = append(f.ran, line)
	for prefix, fn := range f.do {
		if strings.HasPrefix(line, prefix) {
			return fn(dir, args)
		}
	}
	return nil, nil
}

func everyTool() map[string]bool {
	m := map[string]bool{}
	for _, t := range checkoutTools {
		m[t] = true
	}
	return m
}

// What a checkout build lacks is named before anything is built: a program, the registry the
// packages artifact goes to, a folder that is not a git checkout.
func TestCheckoutBuildCheck(t *testing.T) {
	dir := fakeCheckout(t)
	ok := &fakeRunner{have: everyTool()}
	if err := (CheckoutBuild{Dir: dir, Registry: "registry.local:5000/cozystack", Run: ok}).Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	noDocker := &fakeRunner{have: everyTool()}
	delete(noDocker.have, "docker")
	delete(noDocker.have, "flux")
	notGit := &fakeRunner{have: everyTool(), do: map[string]func(string, []string) ([]byte, error){
		"git rev-parse": func(string, []string) ([]byte, error) { return nil, errors.New("exit status 128") },
	}}
	for name, c := range map[string]struct {
		b    CheckoutBuild
		want string
	}{
		"no docker":   {CheckoutBuild{Dir: dir, Registry: "r", Run: noDocker}, "docker, flux not on PATH (the checkout's make targets call make, docker, git, yq, flux, helm)"},
		"no registry": {CheckoutBuild{Dir: dir, Run: ok}, "E2E_PLATFORM_REGISTRY is not set: image-packages pushes the packages artifact with `flux push artifact oci://$(REGISTRY)/cozystack-packages`"},
		"not git":     {CheckoutBuild{Dir: dir, Registry: "r", Run: notGit}, "is not a git checkout (git rev-parse HEAD: exit status 128)"},
	} {
		err := c.b.Check(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "checkout:"+dir+" cannot be built here: ") {
			t.Errorf("%s: want %q, got %v", name, c.want, err)
		}
	}
}

// rendered is what `make manifests` writes after image-operator and image-packages rewrote the
// installer's values: the generic asset with the operator pointed at the pushed packages.
func rendered(t *testing.T, registry string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", OperatorAsset))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(string(data), "args: [--leader-elect=true, --install-flux=true, --install-crds=true]",
		"args: [--leader-elect=true, --install-flux=true, --install-crds=true, --platform-source-url=oci://"+registry+"/cozystack-packages, --platform-source-ref=digest=sha256:1111111111111111111111111111111111111111111111111111111111111111]", 1)
}

// A checkout build runs the checkout's own targets with the registry and a tag of its commit,
// loads the operator image into the kind nodes, and returns the rendered manifest pointed at
// the loaded image; a manifest that does not take the pushed packages is refused; a failing
// target is named with the end of its output.
func TestCheckoutBuild(t *testing.T) {
	dir := fakeCheckout(t)
	const reg = "registry.local:5000/cozystack"
	run := &fakeRunner{have: everyTool(), do: map[string]func(string, []string) ([]byte, error){
		"git rev-parse HEAD": func(string, []string) ([]byte, error) {
			return []byte("0123456789abcdef0123456789abcdef01234567\n"), nil
		},
		"make -C " + dir + " manifests": func(string, []string) ([]byte, error) {
			write(t, filepath.Join(dir, "_out", "assets", OperatorAsset), rendered(t, reg))
			return nil, nil
		},
	}}
	var loaded []string
	b := CheckoutBuild{Dir: dir, Registry: reg, Run: run, Load: func(_ context.Context, images []string) error { loaded = append(loaded, images...); return nil }}
	m, res, err := b.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantRan := []string{
		"git rev-parse HEAD",
		"make -C " + filepath.Join(dir, "packages/core/installer") + " image-operator image-packages REGISTRY=" + reg + " IMAGE_TAG=e2e-0123456789ab PUSH=0 LOAD=1",
		"make -C " + dir + " manifests",
	}
	if strings.Join(run.ran, "\n") != strings.Join(wantRan, "\n") {
		t.Fatalf("ran:\n%s\nwant:\n%s", strings.Join(run.ran, "\n"), strings.Join(wantRan, "\n"))
	}
	image := reg + "/cozystack-operator:e2e-0123456789ab"
	if len(loaded) != 1 || loaded[0] != image || res.OperatorImage != image || res.Commit != "0123456789abcdef0123456789abcdef01234567" || res.PackagesURL != "oci://"+reg+"/cozystack-packages" {
		t.Fatalf("loaded %v, result %+v", loaded, res)
	}
	objs, err := m.Objects()
	if err != nil {
		t.Fatal(err)
	}
	dep := objs[len(objs)-1].Obj
	c, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if c[0].(map[string]any)["image"] != image || c[0].(map[string]any)["imagePullPolicy"] != "IfNotPresent" {
		t.Fatalf("the Deployment runs %v", c[0])
	}
	if res.Rendered.SHA256 == m.SHA256 {
		t.Fatal("the applied manifest is the rendered one unchanged")
	}
	if err := SetAPIServerHost(objs, "172.18.0.2"); err != nil {
		t.Fatalf("the built manifest is not the generic asset: %v", err)
	}

	// The installer's values were not pointed at the pushed packages.
	run.do["make -C "+dir+" manifests"] = func(string, []string) ([]byte, error) {
		write(t, filepath.Join(dir, "_out", "assets", OperatorAsset), rendered(t, "ghcr.io/cozystack/cozystack"))
		return nil, nil
	}
	if _, _, err := b.Build(context.Background()); err == nil || !strings.Contains(err.Error(), "the operator's --platform-source-url is not oci://"+reg+"/cozystack-packages") {
		t.Fatalf("stale packages: %v", err)
	}
	// A target fails.
	run.do["make -C "+filepath.Join(dir, "packages/core/installer")] = func(string, []string) ([]byte, error) {
		return []byte("#12 ERROR: failed to solve: cannot connect to the docker daemon\n"), errors.New("exit status 2")
	}
	if _, _, err := b.Build(context.Background()); err == nil || !strings.Contains(err.Error(), "exit status 2\n#12 ERROR: failed to solve: cannot connect to the docker daemon") {
		t.Fatalf("a failing target: %v", err)
	}
}
