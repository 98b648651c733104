package guest

import (
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/internal/sim/bootdata"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
)

// bootLines are what the guest's console shows from power-on to the join.
func bootLines(d bootdata.Data, vmi *kubevirtv1.VirtualMachineInstance) []string {
	fw := "SeaBIOS (version 1.16.3-debian-1.16.3-2)"
	if f := vmi.Spec.Domain.Firmware; f != nil && f.Bootloader != nil && f.Bootloader.EFI != nil {
		fw = "BdsDxe: loading Boot0001 \"UEFI Misc Device\" from PciRoot(0x0)/Pci(0x7,0x0)"
	}
	if d.OS == names.OSKairos {
		return []string{
			fw,
			"Linux version 6.8.0-60-generic (buildd@lcy02-amd64-017) #63-Ubuntu SMP PREEMPT_DYNAMIC",
			"Command line: BOOT_IMAGE=/vmlinuz console=tty1 console=ttyS0 root=LABEL=COS_ACTIVE cos-img/filename=/cOS/active.img panic=5 rd.cos.oemlabel=COS_OEM",
			"systemd[1]: systemd 255.4-1ubuntu8 running in system mode",
			"systemd[1]: Hostname set to <localhost>.",
			"kairos-agent[412]: Running stage: rootfs",
			"kairos-agent[412]: Running stage: initramfs",
			"cloud-init: datasource ConfigDrive found: /dev/vdb (instance-id " + string(vmi.UID) + ")",
			"kairos-agent[733]: Running stage: boot",
			"kairos-agent[733]: Installing to disk: device auto (/dev/vda), reboot after install",
			"kairos-agent[733]: Running stage: network",
			"systemd[1]: Started containerd.service - containerd container runtime.",
			"kairos-agent[733]: provider kubeadm: role worker, joining " + d.Endpoint,
		}
	}
	return []string{
		fw,
		"Linux version 6.18.2-talos (@buildkitsandbox) (gcc (GCC) 14.2.0) #1 SMP",
		// The platform boots Talos' openstack image (cozystack/cozystack packages/apps/kubernetes
		// templates/cluster.yaml:97-104), whose kernel arguments send the console to ttyS0
		// (siderolabs/talos v1.13.6 internal/app/machined/pkg/runtime/v1alpha1/platform/openstack/openstack.go:443-447).
		"Command line: talos.platform=openstack console=tty1 console=ttyS0 talos.halt_if_installed=1",
		"[talos] [initramfs] booting Talos v1.13.6",
		"[talos] [initramfs] entering the rootfs",
		"[talos] task setupLogger (1/1): done",
		"[talos] fetching machine config from: openstack (config drive /dev/vdb)",
		"[talos] machine config loaded successfully",
		"[talos] setting hostname {\"hostname\": \"" + nodeName(d, vmi) + "\"}",
		"[talos] service[machined](Running): Health check successful",
		"[talos] service[containerd](Running): Health check successful",
		"[talos] service[apid](Running): Started task apid",
		"[talos] service[kubelet](Preparing): Running pre state",
	}
}

// stallLine is where a stalled boot stops.
func stallLine(d bootdata.Data) string {
	if d.OS == names.OSKairos {
		return "kairos-agent[733]: waiting for network-online.target (no carrier on eth0)"
	}
	return "[talos] task waitForNetwork (1/1): waiting for addresses to be ready"
}

// joinLines are the join's console lines: kubeadm's own (k8s.io/kubernetes v1.35.4
// cmd/kubeadm/app/cmd/phases/join/kubelet.go:316, util/apiclient/wait.go:373,412); a Talos
// guest shows only machined's service lines, never the kubelet's own output (siderolabs/talos
// v1.13.6 internal/app/machined/pkg/system/services/kubelet.go:191,
// internal/app/machined/pkg/system/service_runner.go:125).
func joinLines(d bootdata.Data) []string {
	if d.Kubeadm {
		return []string{
			"[preflight] Running pre-flight checks",
			"[preflight] Reading configuration from the \"kubeadm-config\" ConfigMap in namespace \"kube-system\"...",
			"[kubelet-start] Writing kubelet environment file with flags to file \"/var/lib/kubelet/kubeadm-flags.env\"",
			"[kubelet-start] Starting the kubelet",
			"[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. This can take up to 4m0s",
			"[kubelet-check] The kubelet is healthy after 1.001s",
			"[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap",
		}
	}
	return []string{
		"[talos] service[kubelet](Running): Started task kubelet (PID 1869) for container kubelet",
		"[talos] service[kubelet](Running): Health check successful",
	}
}

// joined is the console after the Node registered: kubeadm's closing words
// (cmd/kubeadm/app/cmd/join.go:58); a Talos guest says nothing of it.
func joined(d bootdata.Data) []string {
	if d.Kubeadm {
		return []string{"This node has joined the cluster:",
			"* Certificate signing request was sent to apiserver and a response was received.",
			"* The Kubelet was informed of the new secure connection details.",
			"Run 'kubectl get nodes' on the control-plane to see this node join the cluster."}
	}
	return nil
}

// joinRefused is what the console shows when the control plane refuses the join: kubeadm's
// error (cmd/kubeadm/app/cmd/phases/workflow/runner.go:262, cmd/kubeadm/app/discovery/discovery.go:46);
// on a Talos console, machined's line for the kubelet that exited (kubeletExited, said where the
// kubelet fails).
func joinRefused(d bootdata.Data) []string {
	if d.Kubeadm {
		return []string{
			"error execution phase preflight: couldn't validate the identity of the API Server: could not find a JWS signature in the cluster-info ConfigMap for token ID \"" + "k8sjn1" + "\"",
			"To see the stack trace of this error execute with --v=5 or higher",
		}
	}
	return nil
}

func joinFailed(d bootdata.Data, why string) []string {
	if d.Kubeadm {
		return []string{"error execution phase kubelet-start: " + why}
	}
	return []string{"[talos] service[kubelet](Waiting): " + why}
}

func shutdownLines(os string) []string {
	if os == names.OSKairos {
		return []string{"systemd[1]: Received SIGRTMIN+4 (ACPI power button).", "systemd-shutdown[1]: Syncing filesystems and block devices.", "reboot: Power down"}
	}
	return []string{"[talos] shutdown via ACPI power button", "[talos] task stopAllServices (1/1): done", "reboot: Power down"}
}

// kubeletExited is the line machined prints on a Talos console when the kubelet exits, here
// because it had no client certificate while the apiserver answered its requests with err: the
// event's line (siderolabs/talos v1.13.6 internal/app/machined/pkg/system/service_runner.go:138,
// "service[%s](%s): %s"), the restarter's words (runner/restart/restart.go:145, "going to
// restart forever") and the task's last output (runner/containerd/containerd.go:244-247, "last
// log"): the kubelet's last log lines, the certificate manager's failure and the exit
// (k8s.io/kubernetes v1.35.6 pkg/kubelet/certificate/transport.go:120, "the server is
// responsive, exiting").
func kubeletExited(err error) string {
	last := fmt.Sprintf("\"Failed while requesting a signed certificate from the control plane\" err=\"%v\"\n"+
		"\"No valid client certificate is found and the server is responsive, exiting.\"", err)
	return fmt.Sprintf("[talos] service[kubelet](Waiting): Error running Containerd(kubelet), going to restart forever: task %q failed: exit code 1 (last log %q)", "kubelet", last)
}
