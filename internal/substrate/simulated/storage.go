package simulated

import (
	"context"
	"fmt"
	"io"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
)

// installStorage sets the management cluster's storage up with the code the kind lane uses: the
// StorageClasses and CDI StorageProfiles of internal/install, applied the same way, then the same
// gate on what the real cdi-controller made of them. A mistake there turns a sim run red as it
// would the real lane's.
func installStorage(ctx context.Context, w *world.World, log io.Writer) error {
	// A client whose discovery sees CDI's CRDs, installed after the world's client started.
	c, err := cluster.New("management", w.Cluster.REST)
	if err != nil {
		return err
	}
	a, err := install.NewApplier(c)
	if err != nil {
		return err
	}
	if err := a.Apply(ctx, install.StorageClasses()); err != nil {
		return fmt.Errorf("sim: storage classes: %w", err)
	}
	if err := a.Apply(ctx, install.StorageProfiles()); err != nil {
		return fmt.Errorf("sim: storage profiles: %w", err)
	}
	if err := install.StorageProfilesAccept(ctx, a.Dynamic(), install.GateOptions{Log: log}); err != nil {
		return fmt.Errorf("sim: storage: %w", err)
	}
	return nil
}
