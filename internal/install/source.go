package install

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// OperatorAsset is the platform release asset that installs the operator on a cluster that is
// not Talos (k3s, kubeadm, kind).
const OperatorAsset = assumptions.OperatorAsset

// apiServerPlaceholder is what the generic asset carries for the apiserver address.
const apiServerPlaceholder = assumptions.OperatorAPIServerPlaceholder

// releaseURL is where Cozystack publishes a release's assets (hack/upload-assets.sh).
const releaseURL = "https://github.com/cozystack/cozystack/releases/download/"

// PlatformSource is where the platform comes from, resolved on this machine.
type PlatformSource struct {
	lane.SourceSpec
	// Raw is the source as given.
	Raw string
	// FromEnv: E2E_PLATFORM_SOURCE gave it, overriding the lane.
	FromEnv bool
	// Checkout is the absolute folder of a checkout source.
	Checkout string
}

// ResolvePlatformSource reads the lane's platform.source, overridden by override when not
// empty (E2E_PLATFORM_SOURCE), and checks on this machine what can be checked without the
// network or a build: a release has a recorded sha256, a manifest file exists, a checkout is a
// Cozystack checkout with the make targets the harness runs. Each refusal says what is missing.
func ResolvePlatformSource(l *lane.Lane, override string) (PlatformSource, error) {
	if l.Platform == nil {
		return PlatformSource{}, fmt.Errorf("%s: platform: the lane says nothing of the platform", l.File)
	}
	s := PlatformSource{Raw: l.Platform.Source}
	if override != "" {
		s = PlatformSource{Raw: override, FromEnv: true}
	}
	where := l.File + ": platform.source"
	if s.FromEnv {
		where = "E2E_PLATFORM_SOURCE"
	}
	if s.Raw == "release:"+lane.DigestUnknown {
		note := ""
		if l.Platform.Note != "" {
			note = " (" + l.Platform.Note + ")"
		}
		return s, fmt.Errorf("%s is %q: no platform release is pinned%s; set E2E_PLATFORM_SOURCE=release:<version>@sha256:<hex>, manifest:<path or URL>@sha256:<hex> or checkout:<dir>", where, s.Raw, note)
	}
	spec, err := lane.ParseSource(s.Raw)
	if err != nil {
		return s, fmt.Errorf("%s: %w", where, err)
	}
	s.SourceSpec = spec
	switch spec.Kind {
	case lane.SourceRelease:
		if s.Digest == "" && s.FromEnv {
			// The lane may record the digest of the very release the override names.
			if ls, err := lane.ParseSource(l.Platform.Source); err == nil && ls.Kind == lane.SourceRelease && ls.Release == s.Release {
				s.Digest = ls.Digest
			}
		}
		if s.Digest == "" {
			return s, fmt.Errorf("%s release:%s has no recorded sha256: Cozystack publishes no checksum for its operator manifests (hack/upload-assets.sh uploads cozypkg-checksums.txt only), so the harness applies an asset only at a digest someone checked; check %s once (curl -sL %s | sha256sum) and pin it as release:%s@sha256:<hex>",
				where, s.Release, OperatorAsset, s.OperatorManifest(), s.Release)
		}
	case lane.SourceManifest:
		if !s.IsURL() {
			abs, err := filepath.Abs(s.Location)
			if err != nil {
				return s, fmt.Errorf("%s %q: %w", where, s.Raw, err)
			}
			if st, err := os.Stat(abs); err != nil || st.IsDir() {
				return s, fmt.Errorf("%s: manifest %s: no such file on this machine (a manifest source names the operator manifest its CI rendered; download it first)", where, abs)
			}
			s.Location = abs
		}
	case lane.SourceCheckout:
		abs, err := filepath.Abs(s.Location)
		if err != nil {
			return s, fmt.Errorf("%s %q: %w", where, s.Raw, err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return s, fmt.Errorf("%s: checkout %s: no such folder on this machine", where, abs)
		}
		if err := checkoutTargets(abs); err != nil {
			return s, fmt.Errorf("%s: checkout %s: %w", where, abs, err)
		}
		s.Checkout = abs
		s.Location = abs
	}
	return s, nil
}

// OperatorManifest is where the operator manifest of the source is: the release asset URL, the
// manifest source's path or URL, or the file a checkout's `make manifests` writes.
func (s PlatformSource) OperatorManifest() string {
	switch s.Kind {
	case lane.SourceRelease:
		return releaseURL + s.Release + "/" + OperatorAsset
	case lane.SourceManifest:
		return s.Location
	}
	return filepath.Join(s.Checkout, "_out", "assets", OperatorAsset)
}

// Pinned is the source with the digest the run verified, to rerun it exactly; "" for a
// checkout (it is built, so only its folder and commit say what it was).
func (s PlatformSource) Pinned() string {
	if s.Kind == lane.SourceCheckout || s.Digest == "" {
		return ""
	}
	return s.SourceSpec.String()
}

// makeTarget matches a make rule's target at the start of a line.
func makeTarget(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s*:([^=]|$)`)
}

// checkoutTargets checks that dir is a Cozystack checkout with the targets the harness runs:
// `make manifests` (the root Makefile writes _out/assets/cozystack-operator-generic.yaml; `make
// assets` does not) and the installer's image-operator and image-packages.
func checkoutTargets(dir string) error {
	for _, want := range []struct{ file, target, why string }{
		{"Makefile", assumptions.ManifestsTarget, "it writes _out/assets/" + OperatorAsset},
		{filepath.Join(assumptions.InstallerDir, "Makefile"), assumptions.ImageOperatorTarget, "it builds the operator image and points values.yaml at it"},
		{filepath.Join(assumptions.InstallerDir, "Makefile"), assumptions.ImagePackagesTarget, "it pushes the packages artifact and points values.yaml at it"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, want.file))
		if err != nil {
			return fmt.Errorf("no %s (is it a cozystack/cozystack checkout?)", want.file)
		}
		if !makeTarget(want.target).Match(data) {
			return fmt.Errorf("%s has no %q target (%s); is it a cozystack/cozystack checkout new enough?", want.file, want.target, want.why)
		}
	}
	return nil
}

// SetPlatformSourceSecret names the Secret the operator gives the OCIRepository it generates
// for the packages artifact (assumptions.PlatformSourceSecretFlag), on the operator's container
// in the manifest. A manifest that names another Secret already is refused: two credentials
// for one source cannot both be meant.
func SetPlatformSourceSecret(objs []Object, name string) error {
	flag := assumptions.PlatformSourceSecretFlag + "="
	for _, o := range objs {
		if o.Obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Obj.Object, "spec", "template", "spec", "containers")
		for ci, c := range containers {
			cm, _ := c.(map[string]any)
			args, _, _ := unstructured.NestedStringSlice(cm, "args")
			operator := false
			for _, a := range args {
				operator = operator || strings.HasPrefix(a, "--platform-source-url=")
			}
			if !operator {
				continue
			}
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, flag); ok {
					if v == name {
						return nil
					}
					return fmt.Errorf("the operator already runs with %s%s; it cannot also take the registry credentials as %s", flag, v, name)
				}
			}
			_ = unstructured.SetNestedStringSlice(cm, append(args, flag+name), "args")
			containers[ci] = cm
			return unstructured.SetNestedSlice(o.Obj.Object, containers, "spec", "template", "spec", "containers")
		}
	}
	return fmt.Errorf("%s: no Deployment runs the operator (a container with --platform-source-url); is this the operator asset?", OperatorAsset)
}

// SetAPIServerHost fills the generic asset's apiserver address: the operator runs on the host
// network of a node and reaches the apiserver there. It fails when the asset has no operator
// Deployment carrying the placeholder, which means the asset is not the generic one.
func SetAPIServerHost(objs []Object, host string) error {
	for _, o := range objs {
		if o.Obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Obj.Object, "spec", "template", "spec", "containers")
		changed := false
		for ci, c := range containers {
			cm, _ := c.(map[string]any)
			env, _, _ := unstructured.NestedSlice(cm, "env")
			for ei, e := range env {
				em, _ := e.(map[string]any)
				if em["name"] == "KUBERNETES_SERVICE_HOST" && em["value"] == apiServerPlaceholder {
					em["value"] = host
					env[ei] = em
					changed = true
				}
			}
			if changed {
				_ = unstructured.SetNestedSlice(cm, env, "env")
				containers[ci] = cm
			}
		}
		if changed {
			return unstructured.SetNestedSlice(o.Obj.Object, containers, "spec", "template", "spec", "containers")
		}
	}
	return fmt.Errorf("%s: no Deployment sets KUBERNETES_SERVICE_HOST to %s; is this the generic operator asset?", OperatorAsset, apiServerPlaceholder)
}
