package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/catalog"
)

// Options configure Components and Platform.
type Options struct {
	GateOptions
	Lane *lane.Lane
	// Source is where the platform comes from (ResolvePlatformSource).
	Source PlatformSource
	// ControlPlaneIP is the management cluster's control-plane node address.
	ControlPlaneIP string
	// LoadBalancerRange is MetalLB's address range on the runner-reachable network.
	LoadBalancerRange string
	// PlatformRecord receives the platform source and the sha256 of every manifest applied
	// (substrate/platform.txt), for people; substrate/platform.json is the repro's.
	PlatformRecord io.Writer
	// Manifest is the operator manifest to apply when the substrate already has it (fetched
	// and verified in the preflight, or built from a checkout); nil fetches the source's.
	Manifest *Manifest
	// PlatformSourceSecret, when set, is a kubernetes.io/dockerconfigjson Secret in cozy-system
	// holding the platform registry's credentials: applied with the operator manifest and named
	// in the operator's --platform-source-secret (SetPlatformSourceSecret).
	PlatformSourceSecret *unstructured.Unstructured
	// GatesOnly judges an installed cluster and applies nothing (the existing substrate).
	GatesOnly bool
}

// withLane fills what the gates take from the lane.
func (o Options) withLane() Options {
	if o.Lane == nil {
		return o
	}
	if o.Lane.Platform != nil && o.Disabled == nil {
		o.Disabled = o.Lane.Platform.DisabledNames()
	}
	if o.Remediation == "" {
		o.Remediation = o.Lane.Policy.Remediation.InstallPolicy()
	}
	return o
}

// Components installs what the harness itself applies (storage classes, the platform
// operator, the platform Package, the MetalLB pool), then gates every pinned component in
// catalog order. With GatesOnly it only gates. ctx carries the lane's "components" deadline.
func Components(ctx context.Context, c *cluster.Cluster, o Options) error {
	o = o.withLane()
	pinned, err := catalog.ForLane(o.Lane)
	if err != nil {
		return err
	}
	a, err := NewApplier(c)
	if err != nil {
		return err
	}
	if !o.GatesOnly {
		if err := applyPlatform(ctx, a, o); err != nil {
			return err
		}
	}
	// A Package orphaned by a disabled one never installs what a gate below waits for: the
	// watch beside the gates ends them with the reason as soon as the operator says so.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		if err := WatchOrphans(ctx, a.Dynamic(), o.Disabled); err != nil {
			cancel(err)
		}
	}()
	for _, p := range pinned {
		if err := Gate(ctx, a.Dynamic(), p, o.GateOptions); err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
				return fmt.Errorf("component %s (%s): %w", p.Name, p.Title, cause)
			}
			return err
		}
		if p.Name == "cdi" {
			if !o.GatesOnly {
				if err := a.Apply(ctx, StorageProfiles()); err != nil {
					return fmt.Errorf("component %s (%s): storage profiles: %w", p.Name, p.Title, err)
				}
			}
			if err := StorageProfilesAccept(ctx, a.Dynamic(), o.GateOptions); err != nil {
				return fmt.Errorf("component %s (%s): %w", p.Name, p.Title, err)
			}
		}
		if p.Name == "metallb" && !o.GatesOnly {
			objs, err := MetalLBPool(p.Namespace, o.LoadBalancerRange)
			if err != nil {
				return err
			}
			if err := a.Apply(ctx, objs); err != nil {
				return err
			}
		}
	}
	return nil
}

func applyPlatform(ctx context.Context, a *Applier, o Options) error {
	if err := a.Apply(ctx, StorageClasses()); err != nil {
		return fmt.Errorf("storage classes: %w", err)
	}
	// A release or manifest source is applied only at its pinned sha256; the operator image
	// the manifest names is checked against the lane's pin by the cozystack-operator gate.
	m := o.Manifest
	if m == nil {
		var err error
		if m, err = Fetch(ctx, o.Source.OperatorManifest(), o.Source.Digest); err != nil {
			return fmt.Errorf("platform operator: %w", err)
		}
	}
	if o.PlatformRecord != nil {
		fmt.Fprintf(o.PlatformRecord, "platform source %s (from E2E_PLATFORM_SOURCE: %t)\noperator manifest %s %s\n", o.Source.Raw, o.Source.FromEnv, m.Source, m.SHA256)
	}
	objs, err := m.Objects()
	if err != nil {
		return fmt.Errorf("platform operator: %w", err)
	}
	if err := SetAPIServerHost(objs, o.ControlPlaneIP); err != nil {
		return fmt.Errorf("platform operator: %s: %w", m.Source, err)
	}
	if sec := o.PlatformSourceSecret; sec != nil {
		if err := SetPlatformSourceSecret(objs, sec.GetName()); err != nil {
			return fmt.Errorf("platform operator: %s: %w", m.Source, err)
		}
		objs = append(objs, Object{Source: "E2E_PLATFORM_REGISTRY credentials", Obj: sec})
	}
	if err := a.Apply(ctx, objs); err != nil {
		return fmt.Errorf("platform operator: %w", err)
	}
	// The operator installs the Package CRD itself; the Package waits for it.
	if err := CRDsEstablished(ctx, a.Dynamic(), []string{"packages.cozystack.io"}, o.GateOptions); err != nil {
		return fmt.Errorf("platform operator: %w", err)
	}
	pkg, err := PlatformPackage(o.Lane, PlatformInput{ControlPlaneIP: o.ControlPlaneIP})
	if err != nil {
		return err
	}
	return a.Apply(ctx, []Object{pkg})
}

// Platform gates the whole platform, then gives the root tenant its etcd (the tenant clusters'
// DataStore) and waits for it. ctx carries the lane's "platform" deadline.
func Platform(ctx context.Context, c *cluster.Cluster, o Options) error {
	o = o.withLane()
	a, err := NewApplier(c)
	if err != nil {
		return err
	}
	if err := PlatformGate(ctx, a.Dynamic(), o.GateOptions); err != nil {
		return err
	}
	return RootEtcd(ctx, a.Dynamic(), o.GatesOnly, o.GateOptions)
}
