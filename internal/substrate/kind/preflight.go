package kind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// Defaults for the inotify limits when the lane gives none: the Cozystack generic install
// guide's (fs.inotify.max_user_instances 8192; kind's known issues ask only 512).
const (
	DefaultInotifyWatches   = assumptions.InotifyWatches
	DefaultInotifyInstances = assumptions.InotifyInstances
)

// kvmGetAPIVersion is _IO(KVMIO, 0x00); every KVM answers 12 (KVM_API_VERSION).
const (
	kvmGetAPIVersion = 0xAE00
	kvmAPIVersion    = 12
)

// DockerInfo is the part of `docker info` the preflight reads.
type DockerInfo struct {
	ServerVersion string `json:"ServerVersion"`
	CgroupVersion string `json:"CgroupVersion"`
	NCPU          int    `json:"NCPU"`
	MemTotal      int64  `json:"MemTotal"`
	DockerRootDir string `json:"DockerRootDir"`
}

// Host is how the preflight looks at the machine; tests replace its probes.
type Host struct {
	// ReadFile reads /proc and /sys files.
	ReadFile func(name string) ([]byte, error)
	// Exists reports whether a path exists.
	Exists func(name string) bool
	// KVMAPIVersion opens path read-write and asks KVM_GET_API_VERSION.
	KVMAPIVersion func(path string) (int, error)
	// DeviceMode is a device node's mode and owner.
	DeviceMode func(path string) (DeviceMode, error)
	// Docker runs `docker info`; its error says why docker is not usable.
	Docker func(ctx context.Context) (DockerInfo, error)
	// FreeBytes is the space free to unprivileged users on the filesystem holding path.
	FreeBytes func(path string) (uint64, error)
	// CgroupV2 reports whether /sys/fs/cgroup is the unified hierarchy.
	CgroupV2 func() (bool, error)
	NumCPU   func() int
	// DummyLink creates a link of type dummy where nothing of the host changes; errNoDummyLink
	// when the kernel has no such link type.
	DummyLink func(ctx context.Context) error
}

// RealHost looks at this machine.
func RealHost() Host {
	return Host{
		ReadFile: os.ReadFile,
		Exists:   func(name string) bool { _, err := os.Stat(name); return err == nil },
		KVMAPIVersion: func(path string) (int, error) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return 0, err
			}
			defer f.Close()
			v, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), kvmGetAPIVersion, 0)
			if errno != 0 {
				return 0, fmt.Errorf("ioctl KVM_GET_API_VERSION: %w", errno)
			}
			return int(v), nil
		},
		Docker:     dockerInfo,
		DeviceMode: deviceMode,
		FreeBytes: func(path string) (uint64, error) {
			var st unix.Statfs_t
			if err := unix.Statfs(path, &st); err != nil {
				return 0, err
			}
			return st.Bavail * uint64(st.Bsize), nil
		},
		CgroupV2: func() (bool, error) {
			var st unix.Statfs_t
			if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
				return false, err
			}
			return st.Type == unix.CGROUP2_SUPER_MAGIC, nil
		},
		NumCPU:    runtime.NumCPU,
		DummyLink: probeDummyLink,
	}
}

func dockerInfo(ctx context.Context) (DockerInfo, error) {
	var info DockerInfo
	path, err := exec.LookPath("docker")
	if err != nil {
		return info, errors.New("the docker CLI is not on PATH (the kind Go API drives docker through it)")
	}
	cmd := exec.CommandContext(ctx, path, "info", "--format", "{{json .}}")
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		if ctx.Err() != nil {
			msg = "no answer within the preflight's time"
		}
		return info, fmt.Errorf("the docker daemon is not reachable: %s", firstLine(msg))
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return info, fmt.Errorf("docker info: %w", err)
	}
	if info.ServerVersion == "" {
		return info, errors.New("the docker daemon is not reachable: docker info names no server")
	}
	return info, nil
}

// Finding is one thing the preflight checked.
type Finding struct {
	Check  string // "docker", "/dev/kvm", "cpu", "memory", "disk", "inotify", "cgroup", "node image", "dummy link"
	OK     bool
	Detail string
}

// Report is everything the preflight found.
type Report struct {
	Findings []Finding
	// CgroupV1: the node config needs the failCgroupV1 patch.
	CgroupV1 bool
	// KVMMissing: the problem is KVM (the hint then points at the emulation lane).
	KVMMissing bool
}

// Text is the report for substrate/preflight.txt, one check a line.
func (r Report) Text() string {
	var b strings.Builder
	for _, f := range r.Findings {
		mark := "ok     "
		if !f.OK {
			mark = "MISSING"
		}
		fmt.Fprintf(&b, "%s %-10s %s\n", mark, f.Check, f.Detail)
	}
	return b.String()
}

// Err is a *substrate.PreflightError naming every missing piece, or nil.
func (r Report) Err(l *lane.Lane) error {
	var missing []string
	for _, f := range r.Findings {
		if !f.OK {
			missing = append(missing, f.Check+": "+f.Detail)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	hint := "this lane runs on " + runsOn(l) + " (see docs/real-lane.md)"
	if r.KVMMissing {
		hint = "this lane needs hardware KVM; run it on " + runsOn(l) + ", or run a lane with kind.emulation: true (longer budgets); it never falls back to emulation on its own"
	}
	return &substrate.PreflightError{Substrate: "kind", Missing: strings.Join(missing, "; "), Hint: hint}
}

func runsOn(l *lane.Lane) string {
	if len(l.Runner.RunsOn) == 0 {
		return "a machine with docker and KVM"
	}
	return strings.Join(l.Runner.RunsOn, ", ")
}

// Check runs every preflight check of a kind lane against h, concurrently, and reports them all.
// It never starts anything slow: docker is asked once, bounded by ctx.
func Check(ctx context.Context, l *lane.Lane, h Host) Report {
	var (
		mu sync.Mutex
		r  Report
		wg sync.WaitGroup
	)
	add := func(f Finding) {
		mu.Lock()
		r.Findings = append(r.Findings, f)
		mu.Unlock()
	}
	var dinfo DockerInfo
	var dockerErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		dinfo, dockerErr = h.Docker(ctx)
	}()
	if image, _, err := NodeImage(l); err != nil {
		add(Finding{Check: "node image", Detail: err.Error()})
	} else {
		add(Finding{Check: "node image", OK: true, Detail: image + " (" + nodeImageSource(l) + ")"})
	}
	kvm, kvmMissing := checkKVM(l, h)
	add(kvm)
	r.KVMMissing = kvmMissing
	add(checkCPU(l, h))
	add(checkMemory(l, h))
	add(checkInotify(l, h))
	add(checkDummyLink(ctx, h))
	v2, err := h.CgroupV2()
	switch {
	case err != nil:
		add(Finding{Check: "cgroup", Detail: "cannot tell the cgroup version of /sys/fs/cgroup: " + err.Error()})
	case v2:
		add(Finding{Check: "cgroup", OK: true, Detail: "v2"})
	default:
		r.CgroupV1 = true
		add(Finding{Check: "cgroup", OK: true, Detail: "v1: kubelets from v1.35 get failCgroupV1: false in the node config"})
	}
	wg.Wait()
	if dockerErr != nil {
		add(Finding{Check: "docker", Detail: dockerErr.Error()})
	} else {
		add(Finding{Check: "docker", OK: true, Detail: fmt.Sprintf("server %s, cgroup %s, root %s", dinfo.ServerVersion, dinfo.CgroupVersion, dinfo.DockerRootDir)})
	}
	add(checkDisk(l, h, dinfo.DockerRootDir))
	order := map[string]int{"node image": 0, "docker": 1, "/dev/kvm": 2, "cpu": 3, "memory": 4, "disk": 5, "inotify": 6, "cgroup": 7, "dummy link": 8}
	sortFindings(r.Findings, order)
	return r
}

func checkCPU(l *lane.Lane, h Host) Finding {
	have, want := h.NumCPU(), l.Runner.CPUs
	f := Finding{Check: "cpu", OK: have >= want, Detail: fmt.Sprintf("%d CPUs, the lane needs %d (runner.cpus)", have, want)}
	return f
}

func checkMemory(l *lane.Lane, h Host) Finding {
	f := Finding{Check: "memory"}
	data, err := h.ReadFile("/proc/meminfo")
	if err != nil {
		f.Detail = "cannot read /proc/meminfo: " + err.Error()
		return f
	}
	kib := meminfoKiB(data, "MemTotal")
	have := float64(kib) / (1 << 20)
	f.OK = have >= float64(l.Runner.MemoryGiB)
	f.Detail = fmt.Sprintf("%.1f GiB, the lane needs %d GiB (runner.memoryGiB)", have, l.Runner.MemoryGiB)
	return f
}

func meminfoKiB(data []byte, key string) int64 {
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func checkDisk(l *lane.Lane, h Host, dockerRoot string) Finding {
	path := dockerRoot
	if path == "" {
		path = "/var/lib/docker"
		if !h.Exists(path) {
			path = "/"
		}
	}
	f := Finding{Check: "disk"}
	free, err := h.FreeBytes(path)
	if err != nil {
		f.Detail = fmt.Sprintf("cannot read the free space of %s: %v", path, err)
		return f
	}
	have := float64(free) / (1 << 30)
	f.OK = have >= float64(l.Runner.DiskGiB)
	f.Detail = fmt.Sprintf("%.0f GiB free under %s, the lane needs %d GiB (runner.diskGiB)", have, path, l.Runner.DiskGiB)
	return f
}

func checkInotify(l *lane.Lane, h Host) Finding {
	wantW, wantI := l.Runner.InotifyWatches, l.Runner.InotifyInstances
	if wantW == 0 {
		wantW = DefaultInotifyWatches
	}
	if wantI == 0 {
		wantI = DefaultInotifyInstances
	}
	f := Finding{Check: "inotify"}
	w, errW := readInt(h, "/proc/sys/fs/inotify/max_user_watches")
	i, errI := readInt(h, "/proc/sys/fs/inotify/max_user_instances")
	if errW != nil || errI != nil {
		f.Detail = fmt.Sprintf("cannot read the inotify limits: %v", errors.Join(errW, errI))
		return f
	}
	f.OK = w >= wantW && i >= wantI
	f.Detail = fmt.Sprintf("max_user_watches %d (need %d), max_user_instances %d (need %d)", w, wantW, i, wantI)
	if !f.OK {
		f.Detail += "; " + inotifyFix(max(w, wantW), max(i, wantI))
	}
	return f
}

// inotifyFix says who raises the inotify limits and how: the job's user cannot (the limits are
// the kernel's, set by root), so on a self-hosted runner its owner does, once, with the
// generic install guide's lines (assumptions.InotifyInstances; generic.md:79-81); the workflows try
// sudo -n first and fall back to this message.
func inotifyFix(watches, instances int) string {
	lines := fmt.Sprintf("fs.inotify.max_user_watches = %d, fs.inotify.max_user_instances = %d, fs.inotify.max_queued_events = %d",
		watches, instances, assumptions.InotifyQueuedEvents)
	return fmt.Sprintf("raise them: sudo sysctl -w fs.inotify.max_user_watches=%d fs.inotify.max_user_instances=%d fs.inotify.max_queued_events=%d "+
		"(the workflow does this where passwordless sudo works: GitHub-hosted runners; on a self-hosted runner without it the runner's owner does, as root, "+
		"and keeps it across reboots with the lines %s in /etc/sysctl.d/99-cozy-e2e.conf, then sudo sysctl --system)",
		watches, instances, assumptions.InotifyQueuedEvents, lines)
}

func readInt(h Host, path string) (int, error) {
	data, err := h.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

func sortFindings(fs []Finding, order map[string]int) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && order[fs[j].Check] < order[fs[j-1].Check]; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
