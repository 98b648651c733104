// Package capitree describes a tenant cluster's Cluster API objects as `clusterctl describe
// cluster` shows them, so the evidence reads the way Cluster API users read a cluster's health.
//
// The object tree is Cluster API's own: sigs.k8s.io/cluster-api/cmd/clusterctl/client/tree
// (Discovery, ObjectTree, its condition and grouping helpers), v1.13.6. clusterctl's printer is
// internal to Cluster API, so the printer here is this project's: written to give the text
// clusterctl v1.13.6 prints (its columns, tree prefixes, the condition each kind shows, group
// rows, messages wrapped at 100 characters), without colours and without trailing blanks. The
// golden files under testdata/ are the real clusterctl v1.13.6 binary's output for a tenant the
// test writes into a local kube-apiserver, and TestPrintsWhatClusterctlPrints holds the printer
// to them.
package capitree

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/tree"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options are the flags of `clusterctl describe cluster` the harness uses.
type Options struct {
	// ShowConditions is --show-conditions: comma-separated kind or kind/name ("all" for all).
	ShowConditions string
	// Echo is --echo: show a Machine's infrastructure and bootstrap objects even when Ready.
	Echo bool
	// NoGrouping is --grouping=false: one row per Machine, never "2 Machines...".
	NoGrouping bool
	// Now is the clock the SINCE column counts from; nil: time.Now.
	Now func() time.Time
}

// Command is the clusterctl command line that shows the same as Describe with o.
func Command(namespace, name string, o Options) string {
	cmd := fmt.Sprintf("clusterctl describe cluster %s -n %s", name, namespace)
	if o.ShowConditions != "" {
		cmd += " --show-conditions " + o.ShowConditions
	}
	if o.Echo {
		cmd += " --echo"
	}
	if o.NoGrouping {
		cmd += " --grouping=false"
	}
	return cmd
}

// Describe discovers Cluster namespace/name's object tree through c (Cluster API's
// tree.Discovery) and prints it as clusterctl does.
func Describe(ctx context.Context, c client.Client, namespace, name string, o Options) (string, error) {
	t, err := tree.Discovery(ctx, c, namespace, name, tree.DiscoverOptions{
		ShowOtherConditions: o.ShowConditions, Echo: o.Echo, Grouping: !o.NoGrouping, AddTemplateVirtualNode: true,
	})
	if err != nil {
		return "", fmt.Errorf("the Cluster API object tree of Cluster %s/%s: %w", namespace, name, err)
	}
	var b strings.Builder
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if err := Print(&b, t, now()); err != nil {
		return "", err
	}
	return b.String(), nil
}
