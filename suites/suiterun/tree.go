package suiterun

import (
	"context"
	"fmt"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/capitree"
	"github.com/cozystack/cozy-e2e/internal/diag"
)

// treeBound bounds one cluster tree: a few list calls, and the file.
const (
	treeTimeout = 15 * time.Second
	treeBytes   = 1 << 20
)

// Tree writes Cluster namespace/name's Cluster API object tree, as `clusterctl describe
// cluster` shows it with o, to rel (a path of the artifacts), headed by the command line that
// shows the same; it records the collector in manifest.json and returns rel. After an
// interrupt it writes nothing, records the tree declined and returns "".
func (s *Suite) Tree(ctx context.Context, scope, namespace, name, rel string, o capitree.Options) (string, error) {
	if s.stream.Declined("cluster tree", scope) {
		return "", nil
	}
	start := time.Now()
	e := diag.Entry{Name: "cluster tree", Scope: scope, Process: "suite " + s.Name, Start: start,
		Bound: diag.Bound{Seconds: budget.Seconds(treeTimeout), Bytes: treeBytes}}
	defer func() {
		e.Duration = budget.Seconds(time.Since(start))
		s.manifest.Add(e)
	}()
	a, err := diag.NewArtifacts(s.Env.Artifacts, diag.NewRedactor(), 0)
	if err != nil {
		e.Status, e.Error = diag.Failed, err.Error()
		return "", err
	}
	tctx, cancel := context.WithTimeout(ctx, treeTimeout)
	defer cancel()
	text, err := capitree.Describe(tctx, s.Mgmt.Client, namespace, name, o)
	if err != nil {
		e.Status, e.Error = diag.Failed, err.Error()
		return "", err
	}
	head := fmt.Sprintf("# %s (Cluster API v1.13.6's object tree, read at %s)\n", capitree.Command(namespace, name, o), time.Now().UTC().Format(time.RFC3339))
	data := []byte(head + text)
	truncated, err := a.WriteFile(rel, data, treeBytes)
	e.Bytes, e.Items, e.Paths = int64(min(len(data), treeBytes)), 1, []string{rel}
	switch {
	case err != nil:
		e.Status, e.Error = diag.Failed, err.Error()
		return "", err
	case truncated:
		e.Status = diag.Truncated
	default:
		e.Status = diag.Complete
	}
	return rel, nil
}
