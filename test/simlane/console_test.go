package simlane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/capitree"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/progress"
	"github.com/cozystack/cozy-e2e/internal/report"
)

// maxGreenLines bounds what a green run prints without a terminal. make e2e adds its own
// lines (the tools' check, 8) to bin/e2e's, and the whole must stay under 60.
const maxGreenLines = 50

// keptMarker is the last line of what a kept run prints.
const keptMarker = "  tear it all down: "

// watchedLog is a run's output, which says when the marker is printed.
type watchedLog struct {
	mu     sync.Mutex
	b      bytes.Buffer
	marker string
	seen   chan struct{}
	once   sync.Once
}

func (w *watchedLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if i := bytes.Index(w.b.Bytes(), []byte(w.marker)); i >= 0 && bytes.IndexByte(w.b.Bytes()[i:], '\n') > 0 {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *watchedLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

var verdictLine = regexp.MustCompile(`^\d\d:\d\d:\d\d e2e: verdict: `)

// heartbeatLine is a waiting subject's state, repeated at most every progress.DefaultHeartbeat
// (internal/progress/console.go): a pool at a stage ("pool md0: at disk-import 30.1s, ...") or
// a phase's time of its ceiling ("phase rollout (cluster lifecycle) 1m0s of 4m0s: ...").
var heartbeatLine = regexp.MustCompile(`^(\d\d:\d\d:\d\d) (?:(pool \S+): at |(phase .*?) [0-9hms.]+ of [0-9hms.]+)`)

// consoleBound is what a green run may print: under lines lines in all, or, when heartbeats
// are left out, under lines lines besides its heartbeats. A lane whose phases wait for minutes
// (the lifecycle lane's Helm upgrades) repeats its state for as long as it waits, by design; its
// heartbeats are held to their pace instead of a count.
type consoleBound struct {
	lines          int
	heartbeatsFree bool
}

// checkConsole holds what a person reads to the console's contract (consoleProblems).
func checkConsole(t *testing.T, out, spec string, red bool, bound consoleBound) {
	t.Helper()
	for _, p := range consoleProblems(out, spec, red, bound, t.Logf) {
		t.Error(p)
	}
}

// consoleProblems: a green run within its bound, each waiting subject's heartbeats at least a
// heartbeat apart, a red run's failure the last thing printed before the verdict.
func consoleProblems(out, spec string, red bool, bound consoleBound, logf func(string, ...any)) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	at := -1
	for i, l := range lines {
		if verdictLine.MatchString(l) {
			at = i
		}
	}
	if at < 0 {
		return []string{fmt.Sprintf("no verdict line among the %d lines printed", len(lines))}
	}
	beats, problems := heartbeatPace(lines)
	logf("%s: %d lines printed, %d of them heartbeats, the verdict on line %d", spec, len(lines), beats, at+1)
	if !red {
		if !strings.Contains(lines[at], "verdict: pass") {
			// The bound is a green run's: a run that failed prints its failures and how to reach
			// what it kept, and the verdict check says why it failed.
			logf("%s: not bounding the lines of a run that did not pass: %s", spec, lines[at])
			return problems
		}
		n, what := len(lines), "lines"
		if bound.heartbeatsFree {
			n, what = len(lines)-beats, "lines besides its heartbeats"
			// A lane bounded besides its heartbeats waits minutes in its phases: a run of it with
			// none recognised means heartbeatLine no longer matches the console's wording, and
			// neither the bound nor the pace would hold anything.
			if beats == 0 {
				problems = append(problems, "no heartbeat recognised among the lines of a lane that waits for minutes: "+
					"heartbeatLine must follow the console's status words (internal/progress/heartbeat.go)")
			}
		}
		if n >= bound.lines {
			problems = append(problems, fmt.Sprintf("a green run printed %d %s, want under %d:\n%s", n, what, bound.lines, out))
		}
		return problems
	}
	if at == 0 || !strings.Contains(lines[at-1], " FAIL ") {
		problems = append(problems, fmt.Sprintf("the line before the verdict is not a failure: %q", lines[max(at-1, 0)]))
	}
	return problems
}

// checkReports: summary.md opens with the timeline, report.html draws every pool's row, and the
// run's Cluster API tree is written; each failed pool has its own tree among its evidence.
func checkReports(t *testing.T, l *lane.Lane, art string) {
	t.Helper()
	sum, err := os.ReadFile(filepath.Join(art, "summary.md"))
	if err != nil {
		t.Errorf("summary.md: %v", err)
	} else if lines := strings.Split(string(sum), "\n"); len(lines) < 4 || lines[2] != "```mermaid" || lines[3] != "gantt" {
		t.Errorf("summary.md does not open with the gantt")
	}
	page, err := os.ReadFile(filepath.Join(art, report.HTMLFile))
	if err != nil {
		t.Errorf("%s: %v", report.HTMLFile, err)
	}
	for _, p := range l.Pools {
		if !bytes.Contains(page, []byte(`data-pool="`+p.Name+`" id="timeline-pool-`+p.Name+`"`)) {
			t.Errorf("%s has no timeline row for pool %s", report.HTMLFile, p.Name)
		}
	}
	// One tree per conformance cluster of the lane.
	trees, _ := filepath.Glob(filepath.Join(art, "clusters", "management", "cluster-tree-*.txt"))
	if len(trees) != len(l.Clusters()) {
		t.Errorf("the run's Cluster API trees: %v; want one for each of the lane's clusters %v", trees, l.Clusters())
	}
	for _, tree := range trees {
		if data, _ := os.ReadFile(tree); !bytes.HasPrefix(data, []byte("# clusterctl describe cluster ")) || !bytes.Contains(data, []byte("└─Workers")) {
			t.Errorf("%s is not a clusterctl describe tree:\n%s", tree, data)
		}
	}
	v, err := verdict.ReadVerdict(filepath.Join(art, "verdict.json"))
	if err != nil {
		return
	}
	for _, f := range v.Failures {
		if f.Pool == "" {
			continue
		}
		rel := "pools/" + f.Pool + "/cluster-tree.txt"
		found := false
		for _, e := range f.Evidence {
			found = found || e == rel
		}
		if data, err := os.ReadFile(filepath.Join(art, filepath.FromSlash(rel))); err != nil || !found ||
			!bytes.Contains(data, []byte("--show-conditions MachineDeployment/")) {
			t.Errorf("pool %s: %s missing, not among its evidence, or not its view (%v)", f.Pool, rel, err)
		}
	}
}

// checkKept looks at a red run the way a person would, through what it printed: kubectl lists
// each failed pool's Machines, the tree of its cluster shows its MachineDeployment, and the
// tenant cluster answers through its kubeconfig. The reach-it block is the last thing printed.
// A run whose deletion failed (deleted) kept what the deletion left: the tenant's namespace.
func checkKept(t *testing.T, art, out string, deleted bool) {
	t.Helper()
	if !strings.HasSuffix(strings.TrimRight(out, "\n"), tearLine(out)) {
		t.Errorf("the teardown command is not the last thing printed:\n%s", tail(out, 5))
	}
	k, err := verdict.ReadKept(filepath.Join(art, "suites", "kubernetes", verdict.KeptFile))
	if err != nil {
		t.Errorf("kept.json: %v", err)
		return
	}
	m := regexp.MustCompile(`(?m)^  management cluster: export KUBECONFIG=(\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Errorf("the kept run names no management kubeconfig:\n%s", tail(out, 20))
		return
	}
	mgmt, err := cluster.FromKubeconfig("management", m[1])
	if err != nil {
		t.Error(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := controlplane.FindTools()
	if err != nil {
		t.Fatal(err)
	}
	if deleted {
		ns, err := exec.CommandContext(ctx, tools.Path("kubectl"), "--kubeconfig", m[1], "get", "namespace", k.Namespace, "-o", "name").CombinedOutput()
		if err != nil {
			t.Errorf("the kept namespace %s of a failed deletion: %v\n%s", k.Namespace, err, ns)
		}
		return
	}
	list, err := exec.CommandContext(ctx, tools.Path("kubectl"), "--kubeconfig", m[1], "-n", k.Namespace,
		"get", "machines.cluster.x-k8s.io", "-o", "name").CombinedOutput()
	if err != nil {
		t.Errorf("kubectl get machines: %v\n%s", err, list)
	}
	if len(k.Pools) == 0 {
		t.Error("kept.json names no failed pool")
	}
	for _, p := range k.Pools {
		for _, name := range p.Machines {
			if !bytes.Contains(list, []byte("machine.cluster.x-k8s.io/"+name+"\n")) {
				t.Errorf("pool %s: kubectl does not list its Machine %s:\n%s", p.Pool, name, list)
			}
		}
		tree, err := capitree.Describe(ctx, mgmt.Client, k.Namespace, p.Cluster, capitree.Options{})
		if err != nil || !strings.Contains(tree, "MachineDeployment/"+p.MachineDeployment) {
			t.Errorf("pool %s: the kept cluster's tree (%v):\n%s", p.Pool, err, tree)
		}
	}
	var mds clusterv1.MachineDeploymentList
	if err := mgmt.Client.List(ctx, &mds, client.InNamespace(k.Namespace)); err != nil || len(mds.Items) == 0 {
		t.Errorf("the kept namespace %s has no MachineDeployment (%v): the teardown ran", k.Namespace, err)
	}
	// Each failed pool's own conformance cluster is kept with a kubeconfig to reach it.
	kubeconfigs := map[string]bool{}
	for _, c := range k.Clusters {
		kubeconfigs[c.Name] = c.Kubeconfig != ""
	}
	for _, p := range k.Pools {
		if !kubeconfigs[p.Cluster] {
			t.Errorf("pool %s: kept.json gives its cluster %s no kubeconfig: %+v", p.Pool, p.Cluster, k.Clusters)
		}
	}
	for _, c := range k.Clusters {
		if c.Kubeconfig == "" {
			continue
		}
		tc, err := cluster.FromKubeconfig(c.Name, c.Kubeconfig)
		if err == nil {
			_, err = tc.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		}
		if err != nil {
			t.Errorf("tenant cluster %s through %s: %v", c.Name, c.Kubeconfig, err)
		}
	}
}

// checkKeptRemoved: once the kept sim is interrupted, the folder it named is gone.
func checkKeptRemoved(t *testing.T, out string) {
	t.Helper()
	m := regexp.MustCompile(`the sim stops and (\S+) is removed`).FindStringSubmatch(out)
	if m == nil {
		t.Errorf("the kept run's teardown command names no folder: %q", tearLine(out))
		return
	}
	if _, err := os.Stat(m[1]); err == nil {
		t.Errorf("%s is still there after the kept run ended", m[1])
	}
}

func tearLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, keptMarker) {
			return l
		}
	}
	return ""
}

// heartbeatPace counts the heartbeats among lines and names each that came closer to its
// subject's last than progress.DefaultHeartbeat, less the second the stamps round away.
func heartbeatPace(lines []string) (int, []string) {
	last := map[string]time.Time{}
	n := 0
	var problems []string
	for _, l := range lines {
		m := heartbeatLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n++
		at, err := time.Parse("15:04:05", m[1])
		if err != nil {
			problems = append(problems, fmt.Sprintf("heartbeat %q: its stamp: %v", l, err))
			continue
		}
		subject := m[2] + m[3]
		if prev, ok := last[subject]; ok && at.After(prev) && at.Sub(prev) < progress.DefaultHeartbeat-time.Second {
			problems = append(problems, fmt.Sprintf("%s repeated its state %s after the last time, want at most every %s: %q", subject, at.Sub(prev), progress.DefaultHeartbeat, l))
		}
		last[subject] = at
	}
	return n, problems
}
