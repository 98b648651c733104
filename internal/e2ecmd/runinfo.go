package e2ecmd

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/kind"
)

// runInfo is run.json: which run this is and the machine it ran on, so a red run is compared
// knowing where it ran (repro.json holds what reruns it).
type runInfo struct {
	Lane      string     `json:"lane"`
	RunID     string     `json:"runId"`
	Substrate string     `json:"substrate"`
	Started   time.Time  `json:"started"`
	JobStart  time.Time  `json:"jobStart"`
	Runner    runnerInfo `json:"runner"`
	// Components are the real upstream components the run uses, with version and module sum,
	// when its substrate lists them (written once preflight passed).
	Components []substrate.Component `json:"components,omitempty"`
	// NodeImage is a kind lane's node image, as the run creates its nodes from it, and where its
	// pin comes from (the lane's component, or E2E_KIND_NODE_IMAGE).
	NodeImage *nodeImage `json:"nodeImage,omitempty"`
}

// nodeImage is the kind node image of a run: image:tag@digest, or the reason there is none.
type nodeImage struct {
	Image  string `json:"image,omitempty"`
	Source string `json:"source,omitempty"`
	// Unpinned says why the run has no usable node image (the preflight refuses it).
	Unpinned string `json:"unpinned,omitempty"`
}

// nodeImageOf is lane l's node image under the environment's E2E_KIND_NODE_IMAGE; nil for a
// lane that is not a kind lane.
func nodeImageOf(l *lane.Lane, getenv func(string) string) *nodeImage {
	if l.Substrate != lane.SubstrateKind {
		return nil
	}
	if v := getenv(kind.NodeImageEnv); v != "" {
		ref, err := kind.ParseNodeImage(v)
		if err != nil {
			return &nodeImage{Unpinned: kind.NodeImageEnv + ": " + err.Error()}
		}
		l = kind.WithNodeImage(l, ref)
	}
	image, _, err := kind.NodeImage(l)
	if err != nil {
		return &nodeImage{Unpinned: err.Error()}
	}
	out := &nodeImage{Image: image}
	for _, c := range l.Components {
		if c.Name == lane.KindNodeComponent {
			out.Source = c.Source
		}
	}
	return out
}

// runnerInfo is the machine identity: red runs are compared knowing where they ran.
type runnerInfo struct {
	Hostname  string `json:"hostname"`
	OS        string `json:"os"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"goVersion"`
}

func writeRunInfo(r *run) error {
	info := runInfo{
		Lane: r.lane.Name, RunID: r.opts.RunID, Substrate: string(r.lane.Substrate),
		Started: r.started.UTC(), JobStart: r.clock.JobStart().UTC(),
		Runner: runner(), Components: r.components, NodeImage: nodeImageOf(r.lane, os.Getenv),
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.artifacts, "run.json"), append(data, '\n'), 0o644)
}

func runner() runnerInfo {
	host, _ := os.Hostname()
	r := runnerInfo{Hostname: host, OS: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		r.Kernel = strings.TrimSpace(string(data))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				r.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return r
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// listComponents records the substrate's real components in run.json, when it lists them.
func (r *run) listComponents(sub substrate.Substrate) {
	inv, ok := sub.(substrate.Inventory)
	if !ok {
		return
	}
	comps, err := inv.Components()
	if err != nil {
		r.logf("run.json: components not listed: %v", err)
		return
	}
	r.components = comps
	if err := writeRunInfo(r); err != nil {
		r.logf("run.json: %v", err)
	}
}
