package lane

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	minorRe  = regexp.MustCompile(`^v1\.(\d+)$`)
	patchRe  = regexp.MustCompile(`^v1\.(\d+)\.\d+$`)
	digestRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// maxUnhealthyRE is what the Kubernetes chart accepts for maxUnhealthy.
	maxUnhealthyRE = regexp.MustCompile(`^[0-9]+%?$`)
	neverSoft      = map[verdict.Class]bool{verdict.Configuration: true, verdict.Preflight: true, verdict.Harness: true}
	substrateOK    = map[Substrate]bool{SubstrateKind: true, SubstrateExisting: true, SubstrateSim: true}
)

// Validate checks everything about the lane that decoding does not: names, references between
// fields, pins and the budget arithmetic.
func (l *Lane) Validate() Errors {
	v := l.validator()
	if want := strings.TrimSuffix(filepath.Base(l.File), ".yaml"); l.File != "" && l.Name != want {
		v.fail("name", "%q does not match the file name (want %q)", l.Name, want)
	}
	if !substrateOK[l.Substrate] {
		v.fail("substrate", "%q is not a substrate (kind, existing, sim)", l.Substrate)
	}
	l.validateClusters(v)
	classes := l.validateClasses(v)
	l.validatePools(v, classes)
	if !digestRe.MatchString(l.Workload.Digest) {
		v.fail("workload.digest", "%q is not a sha256 digest; the workload image is pinned by digest", l.Workload.Digest)
	}
	l.validateComponents(v)
	l.validateSuites(v)
	l.validateBudget(v)
	l.validateTimelines(v)
	for i, s := range l.Policy.Soft {
		c, err := verdict.ParseClass(s)
		if err != nil {
			v.fail(fmt.Sprintf("policy.soft[%d]", i), "%v", err)
		} else if neverSoft[c] {
			v.fail(fmt.Sprintf("policy.soft[%d]", i), "%q can never be soft: it means the run could not judge the product", s)
		}
	}
	for _, r := range []struct{ path, value string }{
		{"policy.remediation.install", l.Policy.Remediation.Install},
		{"policy.remediation.tenant", l.Policy.Remediation.Tenant},
	} {
		if r.value != "" && r.value != RemediationReport && r.value != RemediationFail {
			v.fail(r.path, "%q is neither %s nor %s", r.value, RemediationReport, RemediationFail)
		}
	}
	if l.Runner.Nightly && l.Substrate != SubstrateKind {
		v.fail("runner.nightly", "is only for kind lanes: the e2e workflow runs no other")
	}
	switch l.Substrate {
	case SubstrateKind:
		if l.Platform == nil {
			v.fail("platform", "is required on a kind lane (where the Cozystack platform comes from)")
		}
		if l.Sim != nil {
			v.fail("sim", "is only for sim lanes")
		}
		l.validateKind(v)
	case SubstrateSim:
		if l.Platform != nil {
			v.fail("platform", "is only for kind and existing lanes (the sim stands the platform in)")
		}
		if l.Kind != nil {
			v.fail("kind", "is only for kind lanes")
		}
		if l.Sim != nil && l.Sim.RealNode {
			// The real chart renders the pools of the built-in talos class, and a real-Node lane's
			// post-renderers put their VMs on the real Node; a pool the sim's model of #4911
			// renders would run on kwok's Nodes, whose virt-handler stand-in writes VMI status as
			// admin, which the real virt-api's mutator drops (kubevirt.io/kubevirt v1.8.4
			// pkg/virt-api/webhooks/mutating-webhook/mutators/vmi-mutator.go:134-142).
			for i, p := range l.Pools {
				if p.Class != "talos" {
					v.fail(p.path(i)+".class", "%q: a lane with sim.realNode runs only pools of the built-in talos class, which the real chart renders and the real Node runs; the sim's model renders this one onto kwok's Nodes, where the real virt-api drops the stand-in virt-handler's VMI status", p.Class)
				}
			}
		}
		if l.Sim != nil && l.Sim.MachineHealthCheck != nil {
			m := l.Sim.MachineHealthCheck
			// The chart's own checks (packages/apps/kubernetes templates/cluster.yaml:827-836) and
			// Cluster API's webhook minimum for nodeStartupTimeout.
			if m.MaxUnhealthy != "" && !maxUnhealthyRE.MatchString(m.MaxUnhealthy) {
				v.fail("sim.machineHealthCheck.maxUnhealthy", "must be a bare integer (e.g. 0, 1) or an integer percentage (e.g. 50%%), got %q", m.MaxUnhealthy)
			}
			if d := m.NodeStartupTimeout.D(); d != 0 && d < 30*time.Second {
				v.fail("sim.machineHealthCheck.nodeStartupTimeout", "%s is under 30s, which Cluster API refuses", d)
			}
		}
	}
	return v.errs
}

type validator struct {
	file      string
	lines     map[string]int
	inherited map[string]string
	errs      Errors
}

// validator holds l to its rules, its messages naming l's file and lines.
func (l *Lane) validator() *validator {
	return &validator{file: l.File, lines: l.lines, inherited: l.inherited}
}

func (v *validator) fail(path, format string, args ...any) {
	line, from := v.locate(path)
	v.errs = append(v.errs, &FieldError{File: v.file, Path: path, Line: line, From: from, Issue: fmt.Sprintf(format, args...)})
}

// uniqueName checks the name of a list entry at path: a DNS label (else it "is not" what isNot
// says), and not the name of an earlier entry (seen, which it adds to).
func (v *validator) uniqueName(path, name, isNot string, seen map[string]bool) {
	if !dnsLabel.MatchString(name) {
		v.fail(path, "%q is not %s", name, isNot)
	}
	if seen[name] {
		v.fail(path, "%q is declared twice", name)
	}
	seen[name] = true
}

// locate is the line in the lane's own file of path, or of its nearest parent written there;
// from is the file and line of the lane it extends that wrote path (or the nearest parent of
// it below that line), "" when the lane's own file wrote it.
func (v *validator) locate(path string) (line int, from string) {
	for p := path; p != ""; {
		if n, ok := v.lines[p]; ok {
			return n, from
		}
		if f, ok := v.inherited[p]; ok && from == "" {
			from = f
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0, from
}

func (l *Lane) validateClasses(v *validator) map[string]bool {
	names := map[string]bool{"talos": true, "kairos": true}
	for i, c := range l.Classes {
		path := fmt.Sprintf("classes[%d]", i)
		switch {
		case osfamily.IsBuiltInClass(c.Name):
			v.fail(path+".name", "%q is a built-in class; the platform ships it", c.Name)
		case names[c.Name]:
			v.fail(path+".name", "%q is declared twice", c.Name)
		case !dnsLabel.MatchString(c.Name):
			v.fail(path+".name", "%q is not a DNS label", c.Name)
		}
		names[c.Name] = true
		if !osfamily.Known(c.OS) {
			v.fail(path+".os", "%q is not a worker OS (%s)", c.OS, strings.Join(osfamily.Names(), ", "))
		}
		if c.Image != "" {
			if c.OS != osfamily.Kairos {
				v.fail(path+".image", "only a kairos class may name an image")
			}
			if !strings.Contains(c.Image, "@sha256:") {
				v.fail(path+".image", "%q is not pinned by digest (<image>@sha256:...)", c.Image)
			}
			if !patchRe.MatchString(c.KubernetesVersion) {
				v.fail(path+".kubernetesVersion", "%q: a class with an image names the exact release its kubelet is built at (v1.35.6)", c.KubernetesVersion)
			}
		} else if c.KubernetesVersion != "" {
			v.fail(path+".kubernetesVersion", "is only allowed together with image")
		}
	}
	return names
}

func (l *Lane) validatePools(v *validator, classes map[string]bool) {
	seen := map[string]bool{}
	given := map[string]string{} // lifecycle spec -> pool
	if len(l.Pools) == 0 {
		v.fail("pools", "names no pool")
	}
	for i, p := range l.Pools {
		path := p.path(i)
		v.uniqueName(path+".name", p.Name, "a DNS label", seen)
		validatePoolNames(v, path, p)
		if !classes[p.Class] {
			v.fail(path+".class", "%q is neither a built-in class (talos, kairos) nor declared under classes", p.Class)
		}
		l.validatePoolRelease(v, path, p)
		if p.Replicas < 1 {
			v.fail(path+".replicas", "%d: a pool under test needs at least one worker", p.Replicas)
		}
		if p.Lifecycle == "" {
			continue
		}
		switch other, dup := given[p.Lifecycle]; {
		case !slices.Contains(LifecycleSpecs, p.Lifecycle):
			v.fail(path+".lifecycle", "%q is not a lifecycle spec (%s)", p.Lifecycle, strings.Join(LifecycleSpecs, ", "))
		case dup:
			v.fail(path+".lifecycle", "%q is given to pool %s already; a spec acts on one pool", p.Lifecycle, other)
		default:
			given[p.Lifecycle] = p.Name
		}
	}
}

// The names a pool's objects get, as framework/tenant derives them (a test there holds this
// arithmetic to its CheckPoolNames): the Kubernetes app of cluster c is <c>-<run id>, released
// as kubernetes-<c>-<run id>; a pool's Machines and VMs are <release>-<pool>-<5>-<5> and travel
// as label values (63 characters at most).
const (
	// MaxRunID is the longest run id (E2E_RUN_ID) a lane's names must fit with.
	MaxRunID = 10
	// machineNameFixed is every character of a Machine's name but the cluster's and pool's.
	machineNameFixed = len("kubernetes-") + len("-") + MaxRunID + len("-") + 12
	maxLabelValue    = 63
)

// validatePoolNames checks the pool's cluster name, and that its Machine and VM names fit a
// label value with the longest run id.
func validatePoolNames(v *validator, path string, p Pool) {
	if p.Cluster != "" {
		switch {
		case !dnsLabel.MatchString(p.Cluster):
			v.fail(path+".cluster", "%q is not a DNS label", p.Cluster)
			return
		case p.Cluster == RefusalCluster:
			v.fail(path+".cluster", "%q is the kubernetes suite's cluster of refused pools; name the cluster otherwise", p.Cluster)
		}
	}
	if n := machineNameFixed + len(p.ClusterName()) + len(p.Name); dnsLabel.MatchString(p.Name) && n > maxLabelValue {
		field := ".name"
		if p.Cluster != "" {
			field = ".cluster"
		}
		v.fail(path+field, "pool %q in cluster %q: its Machine and VM names (kubernetes-<cluster>-<run id>-<pool>-<5>-<5>) reach %d characters with a %d-character run id, over the %d of a label value; shorten the pool or cluster name by %d",
			p.Name, p.ClusterName(), n, MaxRunID, maxLabelValue, n-maxLabelValue)
	}
}

func (l *Lane) validateComponents(v *validator) {
	seen := map[string]bool{}
	for i, c := range l.Components {
		path := fmt.Sprintf("components[%d]", i)
		if seen[c.Name] {
			v.fail(path+".name", "%q is declared twice", c.Name)
		}
		seen[c.Name] = true
		switch {
		case c.Digest == DigestUnknown:
			if c.Note == "" {
				v.fail(path+".note", "a digest marked unknown needs a note saying why and how to pin it")
			}
		case c.Digest != "":
			if !digestRe.MatchString(c.Digest) {
				v.fail(path+".digest", "%q is neither sha256:<64 hex> nor %q", c.Digest, DigestUnknown)
			}
		case c.Image != "":
			v.fail(path+".digest", "image %s has no digest; pin it or mark it %q with a note", c.Image, DigestUnknown)
		}
	}
}

func (l *Lane) validateSuites(v *validator) {
	seen := map[string]bool{}
	for i, s := range l.Suites {
		path := fmt.Sprintf("suites[%d].name", i)
		v.uniqueName(path, s.Name, "a suite directory name", seen)
	}
}

func (l *Lane) validateBudget(v *validator) {
	b := l.Budget
	if b.JobCap <= 0 {
		v.fail("budget.jobCap", "must be above zero")
	}
	if len(b.Phases) == 0 {
		v.fail("budget.phases", "names no phase")
	}
	seen := map[string]map[string]bool{}
	for i, p := range b.Phases {
		path := fmt.Sprintf("budget.phases[%d]", i)
		if seen[p.Cluster] == nil {
			seen[p.Cluster] = map[string]bool{}
		}
		// A phase name is once per timeline: each cluster's own phases may repeat a name (pools).
		v.uniqueName(path+".name", p.Name, "a phase name (lower case, digits, dashes)", seen[p.Cluster])
		if p.Ceiling <= 0 {
			v.fail(path+".ceiling", "must be above zero")
		}
		if p.Reserve != nil && *p.Reserve > p.Ceiling {
			v.fail(path+".reserve", "%s is above the phase ceiling %s", p.Reserve, p.Ceiling)
		}
		for name, t := range p.Timeouts {
			if t > p.Ceiling {
				v.fail(path+".timeouts."+name, "%s is above the phase ceiling %s", t, p.Ceiling)
			}
		}
	}
	if a := b.Arithmetic(); a.Total > a.Cap && b.JobCap > 0 {
		v.fail("budget", "does not fit the job cap: phases %s + diagnostics reserve %s + artifact reserve %s + margin %s = %s, which is %s over jobCap %s",
			a.Phases, a.Diagnostics, a.Artifacts, a.Margin, a.Total, a.Total-a.Cap, a.Cap)
	}
}
