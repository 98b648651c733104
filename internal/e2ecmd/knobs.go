package e2ecmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/report"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/substrate/kind"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
)

// knob is one environment variable the harness reads. Every knob is checked before anything
// starts (no folder made, no process started), so a bad value ends the run with exit 2 within
// a second, naming the variable, its rule and an example.
type knob struct {
	name string
	// rule says what a good value is; example is one.
	rule, example string
	// substrates the knob means something on; empty: every lane.
	substrates []lane.Substrate
	// check judges a value that is set (not empty); its error says what is wrong with it.
	check func(v string, l *lane.Lane) error
	// secret: the value is a credential, never repeated in a message.
	secret bool
}

// knobs are every environment variable bin/e2e reads, besides LANE (the --lane default, checked
// by loading the lane). docs/knobs.md lists the same.
var knobs = []knob{
	{name: "E2E_ARTIFACTS", rule: "a folder that does not exist yet or is empty, so runs never mix their evidence",
		example: "_artifacts/sim-1", check: checkArtifacts},
	{name: "E2E_JOB_START", rule: "the CI job's start as an RFC 3339 time, not in the future and within the lane's job cap",
		example: "2026-12-02T10:00:00Z", check: checkJobStart},
	{name: "E2E_RUN_ID", rule: "1 to 10 lowercase letters or digits (every object name carries it)",
		example: "ab12c", check: matches(regexp.MustCompile(`^[a-z0-9]{1,10}$`))},
	{name: "E2E_KEEP", rule: "1 (keep everything and print how to reach it), on-failure (keep a red run) or 0", example: "on-failure",
		check: oneOf("1", "on-failure", "0")},
	{name: "E2E_REUSE", rule: "1 (reuse the kept cluster of the lane's name) or 0", example: "1",
		substrates: []lane.Substrate{lane.SubstrateKind}, check: oneOf("1", "0")},
	{name: "E2E_FROM_PHASE", rule: "a phase of the lane's budget, to start later in the plan", example: "tenant",
		substrates: []lane.Substrate{lane.SubstrateKind, lane.SubstrateExisting}, check: checkPhase},
	{name: "E2E_SIM_FAULT", rule: "sim faults, each <fault>[@<pool>], comma separated (docs/sim.md lists the faults)",
		example: "guest-join-rejected@md0", substrates: []lane.Substrate{lane.SubstrateSim}, check: checkFaults},
	{name: "E2E_SIM_CANARY", rule: "8 to 128 letters, digits, dots, dashes or underscores (a short canary would match by chance)",
		example: "canary-4f2a9c1d", substrates: []lane.Substrate{lane.SubstrateSim},
		check: matches(regexp.MustCompile(`^[A-Za-z0-9._-]{8,128}$`))},
	{name: simulated.AuditLogEnv, rule: "a file path: the management apiserver's audit log of the harness's own requests (make scale-bench sets it)",
		example: "/tmp/audit.jsonl", substrates: []lane.Substrate{lane.SubstrateSim}, check: checkAuditLog},
	{name: "E2E_BASELINE", rule: "the baseline.json of a green run of this lane", example: "_artifacts/sim-green/baseline.json",
		check: checkBaseline},
	{name: "E2E_TOOLS_DIR", rule: "an absolute path to a folder (`make tools` builds into it; hack/tools/build.sh --print names the default)",
		example: "/root/.cache/cozy-e2e/tools/k8s-v1.35.4", check: checkToolsDir},
	{name: "E2E_PLATFORM_SOURCE", rule: "release:<version>[@sha256:<hex>], manifest:<path or https URL>@sha256:<hex> or checkout:<dir>",
		example: "release:v1.6.2@sha256:<hex>", substrates: []lane.Substrate{lane.SubstrateKind, lane.SubstrateExisting}, check: checkPlatformSource},
	{name: kind.RegistryEnv, rule: "<host>[:<port>]/<path>: where a checkout build pushes the packages artifact and the kind nodes pull the platform's images from",
		example: "ghcr.io/<you>/cozystack", substrates: []lane.Substrate{lane.SubstrateKind}, check: checkRegistry},
	{name: kind.RegistryUsernameEnv, rule: "the login for E2E_PLATFORM_REGISTRY, with E2E_PLATFORM_REGISTRY_PASSWORD (the workflow's registry secrets)",
		example: "robot", substrates: []lane.Substrate{lane.SubstrateKind}, check: anyValue},
	{name: kind.RegistryPasswordEnv, rule: "the password or token for E2E_PLATFORM_REGISTRY_USERNAME; it reaches the nodes and the operator, never an artifact",
		example: "<token>", substrates: []lane.Substrate{lane.SubstrateKind}, check: checkRegistryPassword, secret: true},
	{name: kind.NodeImageEnv, rule: "<image>:<tag>@sha256:<64 hex>, the tag a Kubernetes release Cluster API v1.13 supports for a management cluster (v1.32 to v1.36)",
		example:    "kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f",
		substrates: []lane.Substrate{lane.SubstrateKind}, check: checkNodeImage},
	{name: kind.ClusterEnv, rule: "the kind cluster's name, at most 45 of a-z, 0-9, '.' and '-'; a cluster of that name is a leftover of the same job and is deleted before creating (the workflows: e2e-<run id>-<lane>)",
		example: "e2e-12345678901-kubernetes", substrates: []lane.Substrate{lane.SubstrateKind}, check: func(v string, l *lane.Lane) error {
			_, err := kind.ClusterName(l, func(string) string { return v })
			return err
		}},
	{name: kind.NetworkEnv, rule: "kind's docker network for the nodes (kind's own, experimental variable); MetalLB's range is taken from its subnet",
		example: "e2e-12345678901-kubernetes", substrates: []lane.Substrate{lane.SubstrateKind}, check: matches(regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`))},
	{name: "KUBECONFIG", rule: "the management cluster's kubeconfig file (existing lanes; other lanes ignore it)",
		example: "$HOME/.kube/config", check: checkKubeconfig},
	{name: "GITHUB_STEP_SUMMARY", rule: "a file in an existing folder (GitHub Actions sets it)", example: "/tmp/step-summary.md",
		check: checkStepSummary},
}

// checkKnobs judges every knob for lane l and returns one error naming each bad one.
func checkKnobs(getenv func(string) string, l *lane.Lane) error {
	var errs []error
	if a := kind.RegistryAuthFromEnv(getenv); a != nil && l.Substrate == lane.SubstrateKind {
		if err := a.Check(); err != nil {
			errs = append(errs, fmt.Errorf("%s and %s: %v; want both, for the registry %s names (the workflow passes its registry secrets so)", kind.RegistryUsernameEnv, kind.RegistryPasswordEnv, err, kind.RegistryEnv))
		}
	}
	for _, k := range knobs {
		v := getenv(k.name)
		if k.name == "KUBECONFIG" {
			if l.Substrate != lane.SubstrateExisting {
				continue
			}
			if v == "" {
				errs = append(errs, k.refuse(v, errors.New("not set; an existing lane reaches its management cluster through it")))
				continue
			}
		}
		if v == "" {
			continue
		}
		if len(k.substrates) > 0 && !slices.Contains(k.substrates, l.Substrate) && !isOff(k, v) {
			errs = append(errs, k.refuse(v, fmt.Errorf("lane %s runs on the %s substrate; this knob applies to %s lanes only", l.Name, l.Substrate, substrateList(k.substrates))))
			continue
		}
		if err := k.check(v, l); err != nil {
			errs = append(errs, k.refuse(v, err))
		}
	}
	return errors.Join(errs...)
}

// isOff: a switch set to 0 asks for nothing, whatever the substrate.
func isOff(k knob, v string) bool { return v == "0" && (k.name == "E2E_REUSE") }

func (k knob) refuse(v string, why error) error {
	if k.secret {
		return fmt.Errorf("%s (value not shown): %v; want %s (example: %s=%s)", k.name, why, k.rule, k.name, k.example)
	}
	return fmt.Errorf("%s=%q: %v; want %s (example: %s=%s)", k.name, v, why, k.rule, k.name, k.example)
}

// anyValue takes every value that is set.
func anyValue(string, *lane.Lane) error { return nil }

// checkRegistryPassword refuses a password too short for the artifacts to be proven free of it:
// the redactor scrubs, and the leak scan looks for, values of 8 bytes and more only.
func checkRegistryPassword(v string, _ *lane.Lane) error {
	if len(v) < 8 {
		return errors.New("is under 8 characters: the artifacts could not be scanned for it")
	}
	return nil
}

func checkRegistry(v string, _ *lane.Lane) error {
	if strings.Contains(v, "://") {
		return errors.New("names a scheme; give the registry as docker names it")
	}
	host, path, _ := strings.Cut(v, "/")
	if host == "" || path == "" || strings.ContainsAny(v, " @") {
		return errors.New("is not <host>[:<port>]/<path>")
	}
	return nil
}

func substrateList(s []lane.Substrate) string {
	var names []string
	for _, x := range s {
		names = append(names, string(x))
	}
	return strings.Join(names, " and ")
}

func matches(re *regexp.Regexp) func(string, *lane.Lane) error {
	return func(v string, _ *lane.Lane) error {
		if !re.MatchString(v) {
			return errors.New("does not fit")
		}
		return nil
	}
}

func oneOf(values ...string) func(string, *lane.Lane) error {
	return func(v string, _ *lane.Lane) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("not one of %s", strings.Join(values, ", "))
		}
		return nil
	}
}

func checkArtifacts(v string, _ *lane.Lane) error {
	info, err := os.Stat(v)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !info.IsDir():
		return errors.New("is a file")
	}
	entries, err := os.ReadDir(v)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("is not empty (%d entries)", len(entries))
	}
	return nil
}

func checkJobStart(v string, l *lane.Lane) error {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return errors.New("is not an RFC 3339 time")
	}
	now := time.Now()
	if t.After(now.Add(time.Minute)) {
		return fmt.Errorf("is %s in the future", t.Sub(now).Round(time.Second))
	}
	if root := t.Add(l.Budget.JobCap.D() - l.Budget.ArtifactReserve.D()); !root.After(now) {
		return fmt.Errorf("is %s ago: lane %s's job cap %s minus its artifact reserve has run out already",
			now.Sub(t).Round(time.Second), l.Name, l.Budget.JobCap.D())
	}
	return nil
}

func checkPhase(v string, l *lane.Lane) error {
	if _, ok := l.Budget.Phase(v); ok {
		return nil
	}
	var names []string
	for _, p := range l.Budget.Phases {
		names = append(names, p.Name)
	}
	return fmt.Errorf("is not a phase of %s (phases: %s)", l.File, strings.Join(names, ", "))
}

func checkFaults(v string, l *lane.Lane) error {
	if _, err := faults.Parse(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "E2E_SIM_FAULT: "))
	}
	pools := map[string]bool{}
	var names []string
	for _, p := range l.Pools {
		pools[p.Name] = true
		names = append(names, p.Name)
	}
	for _, item := range strings.Split(v, ",") {
		name, pool, ok := strings.Cut(strings.TrimSpace(item), "@")
		if ok && !pools[pool] && !faults.OnComponent(faults.Name(name)) {
			return fmt.Errorf("%q targets pool %q, which lane %s does not have (pools: %s)", item, pool, l.Name, strings.Join(names, ", "))
		}
	}
	return nil
}

func checkBaseline(v string, _ *lane.Lane) error {
	_, err := report.ReadBaseline(v)
	return err
}

func checkToolsDir(v string, _ *lane.Lane) error {
	if !filepath.IsAbs(v) {
		return errors.New("is not an absolute path")
	}
	if info, err := os.Stat(v); err == nil && !info.IsDir() {
		return errors.New("is a file")
	}
	return nil
}

func checkPlatformSource(v string, _ *lane.Lane) error {
	// The form is the lane package's; a local file or folder must exist already, the
	// preflight reads it and checks its digest or its make targets.
	src, err := lane.ParseSource(v)
	if err != nil {
		return err
	}
	switch {
	case src.Kind == lane.SourceCheckout:
		if info, err := os.Stat(src.Location); err != nil || !info.IsDir() {
			return fmt.Errorf("checkout %s is not a folder here", src.Location)
		}
	case src.Kind == lane.SourceManifest && !src.IsURL():
		if info, err := os.Stat(src.Location); err != nil || info.IsDir() {
			return fmt.Errorf("manifest %s is not a file here", src.Location)
		}
	}
	return nil
}

func checkNodeImage(v string, _ *lane.Lane) error {
	_, err := kind.ParseNodeImage(v)
	return err
}

func checkKubeconfig(v string, _ *lane.Lane) error {
	info, err := os.Stat(v)
	if err != nil {
		return errors.New("no such file")
	}
	if info.IsDir() {
		return errors.New("is a folder")
	}
	return nil
}

func checkStepSummary(v string, _ *lane.Lane) error {
	if info, err := os.Stat(filepath.Dir(v)); err != nil || !info.IsDir() {
		return fmt.Errorf("its folder %s does not exist", filepath.Dir(v))
	}
	return nil
}

// checkAuditLog refuses a folder: the apiserver appends its audit events to a file.
func checkAuditLog(v string, _ *lane.Lane) error {
	if info, err := os.Stat(v); err == nil && info.IsDir() {
		return errors.New("is a folder; name a file in it")
	}
	return nil
}
