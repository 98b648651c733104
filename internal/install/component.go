package install

import (
	"context"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cozystack/cozy-e2e/internal/install/catalog"
)

// GateOptions tune the gates.
type GateOptions struct {
	// Log receives progress lines for people.
	Log io.Writer
	// Record receives one line per gate outcome (substrate/gates.txt).
	Record io.Writer
	// Emulation is the lane's kind.emulation: KubeVirt's useEmulation must equal it.
	Emulation bool
	// Disabled is the lane's platform.disabledPackages: the Package gates tell a Package
	// orphaned by one of them (a configuration failure) from one still waiting.
	Disabled []string
	// Remediation is the lane's policy.remediation.install (report or fail).
	Remediation string
	// Note receives one-line facts for the run's summary (install-time remediations); nil
	// drops them.
	Note func(string)
}

// Gate proves one component installed: its CRDs Established, its Deployments Available, its
// webhook Services selecting only its own pods, and its reported version matching the pin.
func Gate(ctx context.Context, dyn dynamic.Interface, p catalog.Pinned, o GateOptions) error {
	err := gate(ctx, dyn, p, o)
	if o.Record != nil {
		if err != nil {
			fmt.Fprintf(o.Record, "FAILED %-24s %v\n", p.Name, err)
		}
	}
	if err != nil {
		return fmt.Errorf("component %s (%s): %w", p.Name, p.Title, err)
	}
	return nil
}

func gate(ctx context.Context, dyn dynamic.Interface, p catalog.Pinned, o GateOptions) error {
	if len(p.CRDs) > 0 {
		if err := CRDsEstablished(ctx, dyn, p.CRDs, o); err != nil {
			return err
		}
	}
	if len(p.Deployments) > 0 {
		if err := DeploymentsAvailable(ctx, dyn, p.Namespace, p.Deployments, o); err != nil {
			return err
		}
	}
	if len(p.Containers) > 0 {
		if err := DeploymentRuns(ctx, dyn, p.Namespace, p.Deployments[0], p.Containers); err != nil {
			return err
		}
	}
	// Only a provider that serves webhooks has webhook Services to check.
	if p.SharedWebhooks {
		if err := WebhookSelectors(ctx, dyn, p.Namespace, p.Deployments); err != nil {
			return err
		}
	}
	res, err := CheckVersion(ctx, dyn, p)
	if err != nil {
		return err
	}
	if p.Name == "kubevirt" {
		if err := KubeVirtReady(ctx, dyn, p, o); err != nil {
			return err
		}
	}
	if o.Record != nil {
		state := "version " + res.Have
		if !res.Checked {
			state = "version not compared: " + res.Note
		}
		fmt.Fprintf(o.Record, "ok     %-24s %s\n", p.Name, state)
	}
	return nil
}

// CheckVersion reads where the component reports its version and compares it with the pin.
// A pin with neither a version nor a digest to compare is reported unchecked, with why.
func CheckVersion(ctx context.Context, dyn dynamic.Interface, p catalog.Pinned) (VersionResult, error) {
	v := p.Version
	pinVersion := versionLike.MatchString(p.Pin.Version)
	pinDigest := strings.HasPrefix(p.Pin.Digest, "sha256:")
	switch {
	case v.Kind != "":
		gvr, err := guessGVR(v.APIVersion, v.Kind)
		if err != nil {
			return VersionResult{}, err
		}
		u, err := dyn.Resource(gvr).Namespace(v.Namespace).Get(ctx, v.Name, metav1.GetOptions{})
		if err != nil {
			return VersionResult{}, fmt.Errorf("version: %s: %w", v.Describe(), err)
		}
		have, _, _ := unstructured.NestedString(u.Object, v.Field...)
		if !pinVersion {
			return VersionResult{Have: have, Note: fmt.Sprintf("the lane pins %q, not a version", p.Pin.Version)}, nil
		}
		if !versionMatches(have, p.Pin.Version) {
			return VersionResult{}, fmt.Errorf("version: %s is %q, the lane pins %s", v.Describe(), have, p.Pin.Version)
		}
		return VersionResult{Checked: true, Have: have}, nil
	case v.Image != "":
		d, err := dyn.Resource(gvrDeployment).Namespace(p.Namespace).Get(ctx, v.Image, metav1.GetOptions{})
		if err != nil {
			return VersionResult{}, fmt.Errorf("version: %s: %w", v.Describe(), err)
		}
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			return VersionResult{}, fmt.Errorf("version: Deployment %s/%s has no containers", p.Namespace, v.Image)
		}
		image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
		if !pinVersion && !pinDigest {
			return VersionResult{Have: image, Note: fmt.Sprintf("the lane pins %q and no digest", p.Pin.Version)}, nil
		}
		ok, what := imageMatches(image, p.Pin.Version, p.Pin.Digest)
		if !ok {
			return VersionResult{}, fmt.Errorf("version: %s runs %s, the lane pins %s", v.Describe(), image, what)
		}
		return VersionResult{Checked: true, Have: image}, nil
	case v.Label != "":
		var have []string
		for _, name := range p.Deployments {
			d, err := dyn.Resource(gvrDeployment).Namespace(p.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return VersionResult{}, fmt.Errorf("version: Deployment %s/%s: %w", p.Namespace, name, err)
			}
			got := d.GetLabels()[v.Label]
			if pinVersion && !versionMatches(got, p.Pin.Version) {
				return VersionResult{}, fmt.Errorf("version: Deployment %s/%s label %s is %q, the lane pins %s", p.Namespace, name, v.Label, got, p.Pin.Version)
			}
			have = append(have, got)
		}
		return VersionResult{Checked: pinVersion, Have: strings.Join(have, ", "), Note: "the lane pins no version"}, nil
	}
	return VersionResult{Note: "the component reports no version"}, nil
}

// KubeVirtReady waits for the KubeVirt CR to be Available and checks what the lane depends on:
// software emulation exactly when the lane allows it, and the serial console log left to each VM.
func KubeVirtReady(ctx context.Context, dyn dynamic.Interface, p catalog.Pinned, o GateOptions) error {
	gvr := schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
	what := "KubeVirt " + p.Version.Namespace + "/" + p.Version.Name + " Available"
	err := Wait(ctx, dyn, Watch{GVR: gvr, Namespace: p.Version.Namespace}, what, o.Log, func(objs []*unstructured.Unstructured) (bool, string, error) {
		kv := index(objs)[p.Version.Name]
		if kv == nil {
			return false, "KubeVirt CR not created yet", nil
		}
		emu, _, _ := unstructured.NestedBool(kv.Object, "spec", "configuration", "developerConfiguration", "useEmulation")
		if emu != o.Emulation {
			return false, "", fmt.Errorf("spec.configuration.developerConfiguration.useEmulation is %t but the lane's kind.emulation is %t: KubeVirt must never fall back to emulation silently, nor emulate on a hardware-KVM lane", emu, o.Emulation)
		}
		phase, _, _ := unstructured.NestedString(kv.Object, "status", "phase")
		s, r, m, _ := condition(kv, "Available")
		return s == "True", fmt.Sprintf("phase %q, Available=%q (%s: %s)", phase, s, r, m), nil
	})
	if err != nil {
		return err
	}
	if o.Record != nil {
		kv, err := dyn.Resource(gvr).Namespace(p.Version.Namespace).Get(ctx, p.Version.Name, metav1.GetOptions{})
		if err == nil {
			_, off, _ := unstructured.NestedFieldNoCopy(kv.Object, "spec", "configuration", "virtualMachineOptions", "disableSerialConsoleLog")
			policy := "serial console log on for every VM"
			if off {
				policy = "serial console log off by default; pools with logSerialConsole turn it on per VM"
			}
			fmt.Fprintf(o.Record, "info   %-24s %s\n", p.Name, policy)
		}
	}
	return nil
}

// guessGVR turns an apiVersion and kind into the resource, by the plural rule the catalog's
// kinds follow (lower case + "s").
func guessGVR(apiVersion, kind string) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("version source %s %s: %w", apiVersion, kind, err)
	}
	return gv.WithResource(strings.ToLower(kind) + "s"), nil
}
