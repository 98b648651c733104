package kind

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// fakeHost is a machine that has everything the lane needs, to be broken one piece at a time.
func fakeHost() Host {
	files := map[string]string{
		"/proc/meminfo":                           "MemTotal:       134217728 kB\nMemFree:        1 kB\n",
		"/proc/cpuinfo":                           "processor\t: 0\nflags\t\t: fpu vme vmx sse\n",
		"/proc/sys/fs/inotify/max_user_watches":   "1048576\n",
		"/proc/sys/fs/inotify/max_user_instances": "8192\n",
	}
	exists := map[string]bool{"/dev/kvm": true, "/sys/module/kvm_intel": true, "/var/lib/docker": true}
	return Host{
		ReadFile: func(name string) ([]byte, error) {
			if s, ok := files[name]; ok {
				return []byte(s), nil
			}
			return nil, os.ErrNotExist
		},
		Exists:        func(name string) bool { return exists[name] },
		KVMAPIVersion: func(string) (int, error) { return 12, nil },
		Docker: func(context.Context) (DockerInfo, error) {
			return DockerInfo{ServerVersion: "28.1.1", CgroupVersion: "2", DockerRootDir: "/var/lib/docker"}, nil
		},
		DeviceMode: func(string) (DeviceMode, error) {
			return DeviceMode{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o660, Owner: "root", Group: "kvm"}, nil
		},
		FreeBytes: func(string) (uint64, error) { return 500 << 30, nil },
		CgroupV2:  func() (bool, error) { return true, nil },
		NumCPU:    func() int { return 32 },
		DummyLink: func(context.Context) error { return nil },
	}
}

// Each missing prerequisite is named on its own, with what the lane needs; a machine that has
// everything passes.
func TestPreflightNamesEachMissingPiece(t *testing.T) {
	l := pinned(t, "kubernetes")
	if err := Check(context.Background(), l, fakeHost()).Err(l); err != nil {
		t.Fatalf("a complete machine refused: %v", err)
	}
	cases := []struct {
		name   string
		break_ func(*Host)
		want   []string
		kvm    bool
	}{
		{"no docker CLI", func(h *Host) {
			h.Docker = func(context.Context) (DockerInfo, error) {
				return DockerInfo{}, errors.New("the docker CLI is not on PATH (the kind Go API drives docker through it)")
			}
		}, []string{"docker: the docker CLI is not on PATH"}, false},
		{"no KVM", func(h *Host) { ex := h.Exists; h.Exists = func(n string) bool { return n != "/dev/kvm" && ex(n) } },
			[]string{"/dev/kvm: absent"}, true},
		{"paravirtual KVM", func(h *Host) {
			h.Exists = func(n string) bool { return n == "/dev/kvm" || n == "/sys/module/kvm_pvm" }
		}, []string{"/dev/kvm: present but unusable (paravirtual KVM, kvm_pvm)", "it never falls back to emulation on its own"}, true},
		{"KVM without hardware virtualisation", func(h *Host) {
			rf := h.ReadFile
			h.ReadFile = func(n string) ([]byte, error) {
				if n == "/proc/cpuinfo" {
					return []byte("flags\t\t: fpu hypervisor\n"), nil
				}
				return rf(n)
			}
		}, []string{"/dev/kvm: present but not hardware KVM"}, true},
		{"KVM refuses the ioctl", func(h *Host) {
			h.KVMAPIVersion = func(string) (int, error) { return 0, errors.New("open /dev/kvm: permission denied") }
		}, []string{"/dev/kvm: present but unusable: open /dev/kvm: permission denied"}, true},
		{"too few CPUs", func(h *Host) { h.NumCPU = func() int { return 2 } }, []string{"cpu: 2 CPUs, the lane needs 16 (runner.cpus)"}, false},
		{"too little memory", func(h *Host) {
			rf := h.ReadFile
			h.ReadFile = func(n string) ([]byte, error) {
				if n == "/proc/meminfo" {
					return []byte("MemTotal:       24576000 kB\n"), nil
				}
				return rf(n)
			}
		}, []string{"memory: 23.4 GiB, the lane needs 64 GiB (runner.memoryGiB)"}, false},
		{"small disk", func(h *Host) { h.FreeBytes = func(string) (uint64, error) { return 80 << 30, nil } },
			[]string{"disk: 80 GiB free under /var/lib/docker, the lane needs 150 GiB (runner.diskGiB)"}, false},
		{"low inotify", func(h *Host) {
			rf := h.ReadFile
			h.ReadFile = func(n string) ([]byte, error) {
				if n == "/proc/sys/fs/inotify/max_user_instances" {
					return []byte("128\n"), nil
				}
				return rf(n)
			}
		}, []string{"inotify: max_user_watches 1048576 (need 524288), max_user_instances 128 (need 8192); raise them: sudo sysctl -w"}, false},
		// these machines' kernel: CONFIG_DUMMY unset, no modules
		{"no dummy link type", func(h *Host) {
			h.DummyLink = func(context.Context) error {
				return dummyLinkAnswer(errors.New("exit status 2"), "RTNETLINK answers: Operation not supported\n")
			}
		}, []string{"dummy link: this kernel cannot create a link of type dummy (CONFIG_DUMMY unset and no dummy module): RTNETLINK answers: Operation not supported; KubeVirt's bridge binding, which the chart's workers use, needs one"}, false},
		// kind's known issues ask 512; the Cozystack generic install guide asks 8192.
		{"inotify instances at kind's 512", func(h *Host) {
			rf := h.ReadFile
			h.ReadFile = func(n string) ([]byte, error) {
				if n == "/proc/sys/fs/inotify/max_user_instances" {
					return []byte("512\n"), nil
				}
				return rf(n)
			}
		}, []string{"max_user_instances 512 (need 8192); raise them: sudo sysctl -w fs.inotify.max_user_watches=1048576 fs.inotify.max_user_instances=8192 fs.inotify.max_queued_events=65536",
			"on a self-hosted runner without it the runner's owner does, as root",
			"fs.inotify.max_user_watches = 1048576, fs.inotify.max_user_instances = 8192, fs.inotify.max_queued_events = 65536 in /etc/sysctl.d/99-cozy-e2e.conf, then sudo sysctl --system"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := fakeHost()
			tc.break_(&h)
			r := Check(context.Background(), l, h)
			err := r.Err(l)
			var pe *substrate.PreflightError
			if !errors.As(err, &pe) {
				t.Fatalf("want a *substrate.PreflightError, got %T %v", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%v", w, err)
				}
			}
			if strings.Count(err.Error(), ": ") < 1 || r.KVMMissing != tc.kvm {
				t.Errorf("KVMMissing %t, want %t", r.KVMMissing, tc.kvm)
			}
		})
	}
	emu := pinned(t, "kubernetes")
	emu.Kind.Emulation = true
	h := fakeHost()
	h.Exists = func(string) bool { return false }
	if err := Check(context.Background(), emu, h).Err(emu); err != nil && strings.Contains(err.Error(), "/dev/kvm") {
		t.Fatalf("an emulation lane asked for KVM: %v", err)
	}
}

// On this machine (paravirtual KVM, no registry, 2 CPUs) the shipped lane stops in the
// preflight within seconds, naming what is missing, and writes substrate/preflight.txt.
func TestPreflightOnThisMachine(t *testing.T) {
	artifacts := t.TempDir()
	s, err := New(shippedLane(t, "kubernetes"), Options{Options: substrate.Options{Artifacts: artifacts, WorkDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Preflight(context.Background())
	took := time.Since(start)
	t.Logf("preflight took %s: %v", took, err)
	if took > 5*time.Second {
		t.Errorf("preflight took %s, want under 5s", took)
	}
	var pe *substrate.PreflightError
	if os.Getenv("CI") == "" && err == nil {
		t.Skip("this machine can run the kind lane")
	}
	if !errors.As(err, &pe) {
		t.Fatalf("want a *substrate.PreflightError, got %v", err)
	}
	for _, want := range []string{"preflight (kind):", "cpu:", "platform: ../../../lanes/kubernetes.yaml: platform.source is \"release:unknown\""} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q", want)
		}
	}
	// The shipped lane pins its node image: the preflight never refuses it.
	if strings.Contains(err.Error(), "node image") {
		t.Errorf("the pinned node image was refused: %v", err)
	}
	data, rerr := os.ReadFile(artifacts + "/substrate/preflight.txt")
	if rerr != nil || !strings.Contains(string(data), "MISSING") ||
		!strings.Contains(string(data), "ok      node image docker.io/kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f (kind v0.31.0's default node image") {
		t.Fatalf("substrate/preflight.txt: %v\n%s", rerr, data)
	}
	t.Logf("substrate/preflight.txt:\n%s", data)
}

func TestFromPhaseMustBeALanePhase(t *testing.T) {
	_, err := New(shippedLane(t, "kubernetes"), Options{FromPhase: "install"})
	if err == nil || !strings.Contains(err.Error(), "E2E_FROM_PHASE=install is not a phase of") || !strings.Contains(err.Error(), "preflight, cluster, components") {
		t.Fatalf("want the phases named, got %v", err)
	}
}

// unpinnedLane is the shipped lane with its node image digest marked unknown, as the lanes were
// before a pin could be read from a source.
func unpinnedLane(t *testing.T) *lane.Lane {
	l := shippedLane(t, "kubernetes")
	for i := range l.Components {
		if l.Components[i].Name == lane.KindNodeComponent {
			l.Components[i].Version, l.Components[i].Digest, l.Components[i].Note = "v1.35", lane.DigestUnknown, "not pinned"
		}
	}
	return l
}

// With E2E_KIND_NODE_IMAGE set to a pinned image, a machine without docker and without KVM
// (this one) is refused for docker and KVM only: the node image is taken, even where the lane
// marks its own digest unknown, and the preflight says where it comes from.
func TestNodeImageOverrideIsNotRefusedWhereDockerAndKVMAre(t *testing.T) {
	h := fakeHost()
	h.Docker = func(context.Context) (DockerInfo, error) {
		return DockerInfo{}, errors.New("the docker daemon is not reachable: Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
	}
	ex := h.Exists
	h.Exists = func(n string) bool {
		return n == "/dev/kvm" || n == "/sys/module/kvm_pvm" || (n != "/sys/module/kvm_intel" && ex(n))
	}
	const image = "kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f"
	for name, l := range map[string]*lane.Lane{"unpinned lane": unpinnedLane(t), "pinned lane": shippedLane(t, "kubernetes")} {
		t.Run(name, func(t *testing.T) {
			s, err := New(l, Options{Options: substrate.Options{WorkDir: t.TempDir()}, NodeImage: image, Host: h})
			if err != nil {
				t.Fatal(err)
			}
			r := Check(context.Background(), s.lane, h)
			var missing []string
			for _, f := range r.Findings {
				if !f.OK {
					missing = append(missing, f.Check)
				}
				if f.Check == "node image" && (!f.OK || f.Detail != image+" (E2E_KIND_NODE_IMAGE (the lane pins "+laneNodeImage(l)+"))") {
					t.Errorf("node image finding: %+v", f)
				}
			}
			if strings.Join(missing, ",") != "docker,/dev/kvm" {
				t.Fatalf("refused for %v, want docker and /dev/kvm only:\n%s", missing, r.Text())
			}
			got, source, err := s.NodeImage()
			if err != nil || got != image || !strings.HasPrefix(source, "E2E_KIND_NODE_IMAGE") {
				t.Fatalf("NodeImage() = %s, %s, %v", got, source, err)
			}
		})
	}
	// Without the override, the unpinned lane is refused for its node image as before.
	r := Check(context.Background(), unpinnedLane(t), h)
	if err := r.Err(unpinnedLane(t)); err == nil || !strings.Contains(err.Error(), "node image: ") {
		t.Fatalf("an unpinned lane without the override: %v", err)
	}
	// A bad override is refused when the substrate is made, naming the variable.
	if _, err := New(shippedLane(t, "kubernetes"), Options{NodeImage: "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"}); err == nil ||
		!strings.Contains(err.Error(), "E2E_KIND_NODE_IMAGE=kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5: it runs Kubernetes v1.37.0, outside the management range") {
		t.Fatalf("kind v0.33.0's default (v1.37.0): %v", err)
	}
}

// The override's form: image, tag and digest, a registry port allowed, the tag a release.
func TestParseNodeImage(t *testing.T) {
	for v, want := range map[string]string{
		"kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f":                  "",
		"registry.local:5000/kind/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5": "",
		"kindest/node:v1.35.0": "has no digest",
		"kindest/node@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f": "is not <image>:<tag>@sha256:<64 hex>",
		"kindest/node:v1.35.0@sha256:452d": "is not <image>:<tag>@sha256:<64 hex>",
		"kindest/node:latest@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f": "is not a Kubernetes release",
	} {
		_, err := ParseNodeImage(v)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: want %q, got %v", v, want, err)
		}
	}
}

// The preflight says the host's /dev/kvm mode: a device not world-writable (a GitHub-hosted
// runner's root:kvm 0660 before its udev rule) is usable by KubeVirt's non-root launcher only
// through containerd's device ownership, which the node config sets.
func TestPreflightSaysTheKVMMode(t *testing.T) {
	l := pinned(t, "kubernetes")
	kvm := func(r Report) Finding {
		for _, f := range r.Findings {
			if f.Check == "/dev/kvm" {
				return f
			}
		}
		t.Fatal("no /dev/kvm finding")
		return Finding{}
	}
	f := kvm(Check(context.Background(), l, fakeHost()))
	if !f.OK || !strings.HasSuffix(f.Detail, "; mode crw-rw---- root:kvm (0660): not world-writable, so KubeVirt's non-root launcher opens it as the owner containerd gives it from its securityContext (device_ownership_from_security_context in the node config)") {
		t.Fatalf("0660: %+v", f)
	}
	h := fakeHost()
	h.DeviceMode = func(string) (DeviceMode, error) {
		return DeviceMode{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, Owner: "root", Group: "kvm"}, nil
	}
	if f := kvm(Check(context.Background(), l, h)); !strings.HasSuffix(f.Detail, "; mode crw-rw-rw- root:kvm (0666): world-writable") {
		t.Fatalf("0666: %+v", f)
	}
	h.KVMAPIVersion = func(string) (int, error) { return 0, errors.New("open /dev/kvm: permission denied") }
	h.DeviceMode = func(string) (DeviceMode, error) {
		return DeviceMode{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o600, Owner: "root", Group: "root"}, nil
	}
	if f := kvm(Check(context.Background(), l, h)); f.OK || f.Detail != "present but unusable: open /dev/kvm: permission denied; mode crw------- root:root (0600): not world-writable, so KubeVirt's non-root launcher opens it as the owner containerd gives it from its securityContext (device_ownership_from_security_context in the node config)" {
		t.Fatalf("0600, unusable: %+v", f)
	}
	// The real probe on this machine reads the real device.
	if m, err := deviceMode("/dev/kvm"); err == nil && !strings.HasPrefix(m.String(), "c") {
		t.Fatalf("/dev/kvm here reads as %s", m)
	}
}
