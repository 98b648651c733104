package guestos

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// CrashOnceEnv, set to "true" in the machine configuration's machine.env, has the OS kill its
// kubelet once per boot, as soon as it first writes to its log (Service.CrashOnce): a crash from
// outside, as the kernel's OOM killer would deal it. No Talos reads it; the sim's fault
// guest-kubelet-crash-once sets it.
const CrashOnceEnv = "COZY_E2E_SIM_KUBELET_CRASH_ONCE"

// Options configure Run.
type Options struct {
	// ConfigDrive is where the config drive is mounted.
	ConfigDrive string
	// Kubelets holds a kubelet per Kubernetes version, <Kubelets>/<version>/kubelet (the
	// version the machine configuration's kubelet image names).
	Kubelets string
	// Interface is the network interface whose first IPv4 address is the Node's.
	Interface string
	// Console is the serial console.
	Console io.Writer
	// Logs is the folder the services' own output goes to.
	Logs string
}

// Run brings the worker from its config drive to a running kubelet and keeps that kubelet
// running until ctx ends. It returns only when the machine cannot go on (a configuration Talos
// would refuse, a missing kubelet), having said why on the console.
func Run(ctx context.Context, o Options) error {
	con := log.New(o.Console, "[talos] ", 0)
	fail := func(err error) error {
		con.Printf("%v", err)
		return err
	}
	m, err := ReadConfigDrive(o.ConfigDrive)
	if err != nil {
		return fail(fmt.Errorf("loading the machine configuration from the config drive %s: %w", o.ConfigDrive, err))
	}
	con.Printf("machine config loaded successfully")
	if m.NodeIP, err = addressOf(o.Interface); err != nil {
		return fail(err)
	}
	if err := setHostname(m.Hostname); err != nil {
		return fail(err)
	}
	con.Printf("setting hostname {\"hostname\": %q}", m.NodeName)
	kubelet := filepath.Join(o.Kubelets, m.Data.KubernetesVersion, "kubelet")
	if _, err := os.Stat(kubelet); err != nil {
		return fail(fmt.Errorf("service[kubelet](Failed): the machine configuration's kubelet %s is not on this disk (%s): build the worker disk with it", m.Data.KubernetesVersion, kubelet))
	}
	if err := prepare(m); err != nil {
		return fail(err)
	}
	args, err := KubeletArgs(m)
	if err != nil {
		return fail(err)
	}
	cri, err := service(o, con, "cri", func() *exec.Cmd { return exec.Command("containerd", "--config", ContainerdConfig) })
	if err != nil {
		return fail(err)
	}
	go cri.Run(ctx)
	if err := waitForSocket(ctx, CRISocket, time.Minute); err != nil {
		return fail(fmt.Errorf("service[cri](Waiting): %w (its log: %s)", err, filepath.Join(o.Logs, "cri.log")))
	}
	k, err := service(o, con, "kubelet", func() *exec.Cmd { return exec.Command(kubelet, args...) })
	if err != nil {
		return fail(err)
	}
	k.Before, k.Healthy = removeServingCert, healthz
	k.CrashOnce = m.Data.Talos.Env[CrashOnceEnv] == "true"
	k.Run(ctx)
	return nil
}

// service is a Service whose output goes to <Logs>/<id>.log.
func service(o Options, con *log.Logger, id string, cmd func() *exec.Cmd) (*Service, error) {
	f, err := os.OpenFile(filepath.Join(o.Logs, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Service{ID: id, Cmd: cmd, Log: f, Console: con}, nil
}

// prepare writes the machine's files and sets what the kubelet checks of its host.
func prepare(m Machine) error {
	fs, err := Files(m)
	if err != nil {
		return err
	}
	for _, f := range fs {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f.Path, f.Data, os.FileMode(f.Mode)); err != nil {
			return err
		}
	}
	for _, d := range []string{"/etc/kubernetes/manifests", KubeletPKIDir, RegistryHosts, "/var/log/pods"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := kernelTunables(); err != nil {
		return err
	}
	return cgroups()
}

// kernelTunables are the sysctls the kubelet refuses to start without under
// protectKernelDefaults, which Talos sets (k8s.io/kubernetes v1.35.6
// pkg/kubelet/cm/container_manager_linux.go:453-461, setupKernelTunables; the values:
// k8s.io/component-helpers v0.35.4 node/util/sysctl/sysctl.go:30-64).
func kernelTunables() error {
	for k, v := range map[string]string{"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
		"kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000", "kernel/keys/root_maxbytes": "25000000"} {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			return fmt.Errorf("setting kernel parameter %s: %w", k, err)
		}
	}
	return nil
}

// cgroups makes the hierarchy Talos runs its kubelet in (cgroupRoot /, systemCgroups /system,
// kubeletCgroups /podruntime/kubelet: siderolabs/talos v1.13.6
// internal/app/machined/pkg/controllers/k8s/kubelet_spec.go:300-302; github.com/siderolabs/talos/pkg/machinery v1.13.6
// constants/constants.go:741, :828, :858) on the unified hierarchy, with the controllers the kubelet's QoS cgroups
// need enabled below the root, and moves the OS itself into /system.
func cgroups() error {
	root := "/sys/fs/cgroup"
	ctrls, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup v2 is not mounted at %s: %w", root, err)
	}
	for _, c := range strings.Fields(string(ctrls)) {
		if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+"+c), 0o644); err != nil {
			return fmt.Errorf("enabling the cgroup controller %s: %w", c, err)
		}
	}
	for _, d := range []string{"system", "podruntime/kubelet", "podruntime/runtime"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(root, "system", "cgroup.procs"), []byte(fmt.Sprint(os.Getpid())), 0o644)
}

// removeServingCert deletes the kubelet's self-signed serving certificate before each start,
// as Talos does (internal/app/machined/pkg/controllers/k8s/kubelet_service.go:503-521).
func removeServingCert() error {
	for _, f := range []string{"kubelet.crt", "kubelet.key"} {
		if err := os.Remove(filepath.Join(KubeletPKIDir, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// addressOf is the first IPv4 address of the interface.
func addressOf(name string) (string, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("task waitForNetwork: no interface %s: %w", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("task waitForNetwork: %s has no IPv4 address (no DHCP lease?)", name)
}

// setHostname sets the kernel's host name to the short name and its domain to the rest.
func setHostname(fqdn string) error {
	host, domain, _ := strings.Cut(fqdn, ".")
	if err := syscall.Sethostname([]byte(host)); err != nil {
		return fmt.Errorf("setting hostname %q: %w", host, err)
	}
	if domain != "" {
		if err := syscall.Setdomainname([]byte(domain)); err != nil {
			return fmt.Errorf("setting domainname %q: %w", domain, err)
		}
	}
	return nil
}

// waitForSocket waits until something listens on the unix socket path.
func waitForSocket(ctx context.Context, path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nothing listens on %s after %s: %v", path, limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
