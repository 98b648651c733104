package install

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// OperatorAsset is the platform release asset that installs the operator on a cluster that is
// not Talos (k3s, kubeadm, kind).
const OperatorAsset = "cozystack-operator-generic.yaml"

// apiServerPlaceholder is what the generic asset carries for the apiserver address.
const apiServerPlaceholder = "REPLACE_ME"

// PlatformSource is where the platform comes from.
type PlatformSource struct {
	// Raw is the source as given ("release:v1.6.2" or a checkout path).
	Raw string
	// Release is the version for a release source.
	Release string
	// Checkout is the folder of a local checkout.
	Checkout string
	// FromEnv: E2E_PLATFORM_SOURCE gave it, overriding the lane.
	FromEnv bool
}

// ResolvePlatformSource reads the lane's platform.source, overridden by override when not empty
// (E2E_PLATFORM_SOURCE).
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
	if v, ok := strings.CutPrefix(s.Raw, "release:"); ok {
		if v == "" || v == lane.DigestUnknown {
			note := ""
			if l.Platform.Note != "" {
				note = " (" + l.Platform.Note + ")"
			}
			return s, fmt.Errorf("%s is %q: no platform release is pinned%s; set E2E_PLATFORM_SOURCE=release:<version> or =<checkout>", where, s.Raw, note)
		}
		s.Release = v
		return s, nil
	}
	abs, err := filepath.Abs(s.Raw)
	if err != nil {
		return s, fmt.Errorf("%s %q: %w", where, s.Raw, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return s, fmt.Errorf("%s %q is neither release:<version> nor a checkout folder", where, s.Raw)
	}
	s.Checkout = abs
	return s, nil
}

// OperatorManifest is where the operator manifest of the source is: the release asset URL, or
// the asset a checkout's `make assets` wrote.
func (s PlatformSource) OperatorManifest() string {
	if s.Release != "" {
		return "https://github.com/cozystack/cozystack/releases/download/" + s.Release + "/" + OperatorAsset
	}
	return filepath.Join(s.Checkout, "_out", "assets", OperatorAsset)
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
