package kind

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// DeviceMode is a device node's permissions and owner.
type DeviceMode struct {
	Mode         fs.FileMode
	Owner, Group string
}

// WorldWritable: every user may open it read-write.
func (m DeviceMode) WorldWritable() bool { return m.Mode.Perm()&0o006 == 0o006 }

// String is the mode as ls prints it, the owner and the octal permissions.
func (m DeviceMode) String() string {
	kind := "-"
	switch {
	case m.Mode&fs.ModeCharDevice != 0:
		kind = "c"
	case m.Mode&fs.ModeDevice != 0:
		kind = "b"
	}
	return fmt.Sprintf("%s%s %s:%s (%04o)", kind, m.Mode.Perm().String()[1:], m.Owner, m.Group, m.Mode.Perm())
}

func deviceMode(path string) (DeviceMode, error) {
	st, err := os.Stat(path)
	if err != nil {
		return DeviceMode{}, err
	}
	m := DeviceMode{Mode: st.Mode(), Owner: "?", Group: "?"}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		m.Owner, m.Group = strconv.Itoa(int(sys.Uid)), strconv.Itoa(int(sys.Gid))
		if u, err := user.LookupId(m.Owner); err == nil {
			m.Owner = u.Username
		}
		if g, err := user.LookupGroupId(m.Group); err == nil {
			m.Group = g.Name
		}
	}
	return m, nil
}

func checkKVM(l *lane.Lane, h Host) (Finding, bool) {
	f := Finding{Check: "/dev/kvm"}
	if l.Kind != nil && l.Kind.Emulation {
		f.OK, f.Detail = true, "not needed: the lane runs KubeVirt in software emulation"
		return f, false
	}
	if !h.Exists("/dev/kvm") {
		f.Detail = "absent: the machine offers no KVM (no nested virtualisation?)"
		return f, true
	}
	f, missing := checkKVMDevice(h)
	f.Detail += kvmModeDetail(h)
	return f, missing
}

// kvmModeDetail says the host's /dev/kvm mode and what it means for KubeVirt's launcher.
func kvmModeDetail(h Host) string {
	if h.DeviceMode == nil {
		return ""
	}
	m, err := h.DeviceMode("/dev/kvm")
	switch {
	case err != nil:
		return "; its mode cannot be read: " + err.Error()
	case m.WorldWritable():
		return "; mode " + m.String() + ": world-writable"
	}
	return "; mode " + m.String() + ": not world-writable, so KubeVirt's non-root launcher opens it as the owner containerd gives it from its securityContext (" +
		assumptions.DeviceOwnershipKey + " in the node config)"
}

func checkKVMDevice(h Host) (Finding, bool) {
	f := Finding{Check: "/dev/kvm"}
	v, err := h.KVMAPIVersion("/dev/kvm")
	if err != nil {
		f.Detail = "present but unusable: " + err.Error()
		return f, true
	}
	if v != kvmAPIVersion {
		f.Detail = fmt.Sprintf("present but answers KVM API version %d (want %d)", v, kvmAPIVersion)
		return f, true
	}
	// Which vendor module serves it tells hardware KVM from a paravirtual one.
	for _, mod := range []string{"kvm_pvm"} {
		if h.Exists("/sys/module/" + mod) {
			f.Detail = "present but unusable (paravirtual KVM, " + mod + "): it runs only guests built for it, not the worker images KubeVirt boots"
			return f, true
		}
	}
	cpuinfo, _ := h.ReadFile("/proc/cpuinfo")
	hasVMX, hasSVM := cpuFlag(cpuinfo, "vmx"), cpuFlag(cpuinfo, "svm")
	intel, amd := h.Exists("/sys/module/kvm_intel"), h.Exists("/sys/module/kvm_amd")
	if !(hasVMX && intel) && !(hasSVM && amd) {
		f.Detail = "present but not hardware KVM: the CPU shows no vmx/svm flag with kvm_intel/kvm_amd loaded"
		return f, true
	}
	f.OK, f.Detail = true, fmt.Sprintf("hardware KVM (API %d, %s)", v, map[bool]string{true: "kvm_intel", false: "kvm_amd"}[hasVMX && intel])
	return f, false
}

func cpuFlag(cpuinfo []byte, flag string) bool {
	for _, line := range strings.Split(string(cpuinfo), "\n") {
		if !strings.HasPrefix(line, "flags") {
			continue
		}
		_, list, _ := strings.Cut(line, ":")
		for _, f := range strings.Fields(list) {
			if f == flag {
				return true
			}
		}
		return false
	}
	return false
}
