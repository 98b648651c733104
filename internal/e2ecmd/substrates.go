package e2ecmd

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/sim/bootstrap"
	"github.com/cozystack/cozy-e2e/internal/sim/cdi"
	"github.com/cozystack/cozy-e2e/internal/sim/guest"
	"github.com/cozystack/cozy-e2e/internal/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/internal/sim/lifecycle"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/vmsize"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/existing"
	"github.com/cozystack/cozy-e2e/internal/substrate/kind"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
)

// newSubstrate builds the substrate the lane names.
func newSubstrate(l *lane.Lane, o substrate.Options) (substrate.Substrate, error) {
	switch l.Substrate {
	case lane.SubstrateSim:
		s, err := simulated.New(l, o)
		if err != nil {
			return nil, err
		}
		// The machines' stand-ins: the Kairos bootstrap provider, KubeVirt's virt-handler, the VM
		// size vmi-unschedulable sets, CDI, the guest, and what happens to a worker after it
		// joined (a powered-off guest's silent kubelet, the lifecycle faults); the sim substrate
		// runs the real CAPK, Talos bootstrap provider and virt-controller itself.
		for _, setup := range []func(ctrl.Manager, *simenv.Env) error{bootstrap.Setup, kubevirt.Setup, vmsize.Setup, cdi.Setup, guest.Setup, lifecycle.Setup} {
			s.AddStandIn(func(mgr ctrl.Manager, _ *world.World, env *simenv.Env) error { return setup(mgr, env) })
		}
		return s, nil
	case lane.SubstrateKind:
		return kind.New(l, kind.OptionsFromEnv(o))
	case lane.SubstrateExisting:
		return existing.New(l, existing.OptionsFromEnv(o))
	}
	return nil, fmt.Errorf("%s: substrate %q is not one of sim, kind, existing", l.File, l.Substrate)
}
