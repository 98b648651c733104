package guest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/bootdata"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// guest is one VMI's operating system.
type guest struct {
	g      *guests
	vmi    *kubevirtv1.VirtualMachineInstance
	cancel context.CancelFunc
	done   chan struct{}
	con    console
	off    sync.Once
	os     string
}

func (gu *guest) env() *simenv.Env { return gu.g.env }

// run boots the guest and joins it; it ends at the join, a refusal, a stall, or ctx's end.
func (gu *guest) run(ctx context.Context) {
	defer close(gu.done)
	vmi := gu.vmi
	gu.con = console{start: gu.env().Now(), now: gu.env().Now, ports: gu.env().Serial, ns: vmi.Namespace, vmi: vmi.Name, uid: string(vmi.UID)}
	if gu.env().RealNode(vmi.Status.NodeName) {
		// A real VM on a real Node joins by itself: the kubelet inside it takes the bootstrap
		// data from its config drive (node.WorkerDiskJoin). Nothing is played for it here.
		gu.g.logf("VMI %s/%s on the real Node %s: the guest joins by itself; no host-side join", vmi.Namespace, vmi.Name, vmi.Status.NodeName)
		return
	}
	if pod, err := kubevirt.Launcher(ctx, gu.g.c, vmi); err == nil && pod != nil && kubevirt.ConsoleLog(pod) && gu.env().Logs != nil {
		if path, err := gu.env().Logs.ContainerLog(pod.Namespace, pod.Name, kubevirt.ConsoleContainer); err == nil {
			gu.con.path = path
		}
	}
	pool, err := standin.PoolOf(ctx, gu.g.c, vmi.Namespace, vmi.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		gu.con.say("cloud-init: cannot read instance data: " + err.Error())
		return
	}
	known := err == nil
	active := func(n faults.Name) bool { return known && pool.Active(gu.env(), n) }
	data, err := gu.userdata(ctx, pool, known)
	if err != nil {
		gu.con.say("SeaBIOS (version 1.16.3)", "Booting from Hard Disk...", "cloud-init: no usable datasource: "+err.Error())
		return
	}
	gu.os = data.OS
	boot := bootLines(data, vmi)
	stall := active(faults.MHCReplacement) && gu.g.claimStall(pool)
	if stall {
		boot = boot[:len(boot)/2]
	}
	step := gu.env().Latency(LatencyBoot) / time.Duration(len(boot)+1)
	for _, l := range boot {
		if !sleep(ctx, step) {
			return
		}
		gu.con.say(l)
	}
	if stall {
		gu.con.say(stallLine(data))
		// The Machine is what its health check replaces: the record names it by UID, so a
		// test can tell its replacement from it.
		_ = gu.env().Observe(simenv.Observation{Fault: faults.MHCReplacement, Pool: pool.Name, Object: "Machine/" + vmi.Namespace + "/" + pool.Machine,
			UID: pool.MachineUID, Detail: "the guest of VMI " + vmi.Name + " stalls at boot; its Machine never gets a Node"})
		return
	}
	gu.join(ctx, pool, known, data)
}

// join registers the Node, or shows why not. A Talos guest joins only with what its machine
// configuration gives its kubelet, against the tenant control plane itself (tlsBootstrap); a
// kubeadm (Kairos) guest's join is modelled: it reads the tenant's kubelet-config and registers
// through the Cluster API kubeconfig.
func (gu *guest) join(ctx context.Context, pool standin.Pool, known bool, data bootdata.Data) {
	vmi := gu.vmi
	active := func(n faults.Name) bool { return known && pool.Active(gu.env(), n) }
	// The data is what the guest read as its VM started: KubeVirt builds the config drive once,
	// when the domain starts, so data a provider renders again later (Kairos, once the
	// KubevirtMachine has its providerID) reaches only a VMI started after it.
	var wc client.Client
	if data.Kubeadm {
		clusterName := vmi.Labels[clusterv1.ClusterNameLabel]
		if known {
			clusterName = pool.Cluster
		}
		var err error
		if wc, err = gu.g.tenants.Client(ctx, gu.g.c, vmi.Namespace, clusterName); err != nil {
			gu.con.say(joinFailed(data, "cannot reach the control plane: "+err.Error())...)
			return
		}
	}
	name := nodeName(data, vmi)
	steps := joinLines(data)
	step := gu.env().Latency(LatencyJoin) / time.Duration(len(steps)+1)
	for i, l := range steps {
		if !sleep(ctx, step) {
			return
		}
		if data.Kubeadm && i == 1 {
			if !gu.readKubeletConfig(ctx, wc, pool) {
				return
			}
		}
		if i == len(steps)/2 {
			if data.Kubeadm && active(faults.GuestJoinRejected) {
				gu.refused(pool, data, nil)
				return
			}
			if !data.Kubeadm {
				if active(faults.GuestJoinRejected) {
					data.BootstrapToken = foreignToken(data.BootstrapToken)
				}
				if wc = gu.kubelet(ctx, pool, data, name); wc == nil {
					return
				}
			}
		}
		gu.con.say(l)
	}
	if wc == nil {
		return // a join whose console has no lines to pass the bootstrap at
	}
	node := newNode(name, data, vmi, active(faults.NodeNotReady), active(faults.NodeTainted))
	node.Spec.ProviderID = data.ProviderID // the kubelet's --provider-id, when the data passes one
	if err := wc.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		gu.con.say(joinFailed(data, "registering node "+name+": "+err.Error())...)
		return
	}
	gu.con.say(joined(data)...)
	obj := "Node/" + name
	if data.PatchProviderID != "" && node.Spec.ProviderID == "" {
		go gu.patchProviderID(ctx, wc, pool, name, data.PatchProviderID, active(faults.ProviderIDLate))
	}
	switch {
	case name != vmi.Name && node.Spec.ProviderID == "" && active(faults.ProviderIDMissing):
		_ = gu.env().Observe(simenv.Observation{Fault: faults.ProviderIDMissing, Pool: pool.Name, Object: obj,
			Detail: fmt.Sprintf("Node %s registered for VMI %s without a providerID", name, vmi.Name)})
	case active(faults.NodeTainted):
		_ = gu.env().Observe(simenv.Observation{Fault: faults.NodeTainted, Pool: pool.Name, Object: obj, Detail: "taint " + stuckTaint.ToString()})
	case active(faults.NodeNotReady):
		_ = gu.env().Observe(simenv.Observation{Fault: faults.NodeNotReady, Pool: pool.Name, Object: obj, Detail: "Ready=False " + notReadyMessage})
		gu.heartbeat(ctx, wc, name)
	case active(faults.NodeLabelRemoved):
		// A labeller, not the kubelet: the kubelet puts hostname back only when it registers again.
		patch := []byte(`{"metadata":{"labels":{"` + hostnameLabel + `":null}}}`)
		if err := wc.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err == nil {
			_ = gu.env().Observe(simenv.Observation{Fault: faults.NodeLabelRemoved, Pool: pool.Name, Object: obj, Detail: "label " + hostnameLabel + " removed"})
		}
	}
}

// refused shows a refused join: kubeadm's error on the console, nothing on a Talos console
// (its kubelet never registers). The moment is recorded when guest-join-rejected targets the
// pool; a Talos refusal the fault did not bring about goes to the sim's guest log.
// foreignToken is a bootstrap token of token's id whose secret the tenant does not hold (token's
// secret reversed): what a kubelet presents when its machine configuration was rendered from a
// token the tenant no longer has. The tenant apiserver refuses it (401) and no CSR is made.
func foreignToken(token string) string {
	id, secret, _ := strings.Cut(token, ".")
	s := []rune(secret)
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return id + "." + string(s)
}

func (gu *guest) refused(pool standin.Pool, data bootdata.Data, why error) {
	vmi := gu.vmi
	lines := joinRefused(data)
	gu.con.say(lines...)
	detail := "the control plane refused the kubelet's bootstrap credentials: no CSR, no Node"
	if len(lines) > 0 {
		detail = lines[0]
	}
	if why != nil {
		detail = "the kubelet's TLS bootstrap failed, no Node: " + why.Error()
	}
	if pool.Name != "" && pool.Active(gu.env(), faults.GuestJoinRejected) {
		_ = gu.env().Observe(simenv.Observation{Fault: faults.GuestJoinRejected, Pool: pool.Name,
			Object: "VirtualMachineInstance/" + vmi.Namespace + "/" + vmi.Name, Detail: detail})
		return
	}
	gu.g.logf("VMI %s/%s: %s", vmi.Namespace, vmi.Name, detail)
}

// readKubeletConfig is kubeadm reading kube-system/kubelet-config; without clusterDNS the join
// goes on, and the kubelet will give pods no cluster DNS.
func (gu *guest) readKubeletConfig(ctx context.Context, wc client.Client, pool standin.Pool) bool {
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: names.KubeletConfigNamespace, Name: names.KubeletConfigName}
	if err := wc.Get(ctx, key, &cm); err != nil {
		gu.con.say(joinFailed(bootdata.Data{Kubeadm: true}, fmt.Sprintf("error execution phase kubelet-start: failed to get config map %s: %v", names.KubeletConfigName, err))...)
		return false
	}
	gu.con.say(`[kubelet-start] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"`)
	var svc corev1.Service
	dnsIP := ""
	if err := wc.Get(ctx, client.ObjectKey{Namespace: names.CoreDNSNamespace, Name: names.CoreDNSService}, &svc); err == nil {
		dnsIP = svc.Spec.ClusterIP
	}
	if !strings.Contains(cm.Data[names.KubeletConfigKey], "- "+dnsIP+"\n") {
		if gu.env().Faults.Selected(faults.ClusterDNSMismatch) {
			_ = gu.env().Observe(simenv.Observation{Fault: faults.ClusterDNSMismatch, Pool: pool.Name,
				Object: "ConfigMap/" + key.Namespace + "/" + key.Name + " (tenant " + pool.Cluster + ")",
				Detail: "the kubelet configuration the join read names no clusterDNS at the CoreDNS Service's " + dnsIP})
		}
	}
	return true
}

// stop ends the guest without a word, once: its domain is gone.
func (gu *guest) stop() {
	gu.off.Do(func() {
		gu.cancel()
		go func() {
			<-gu.done
			gu.env().Serial.Hangup(gu.vmi.Namespace, gu.vmi.Name, string(gu.vmi.UID))
		}()
	})
}

// powerDown writes the guest's shutdown, once, when its VMI is deleted.
func (gu *guest) powerDown() {
	gu.off.Do(func() {
		gu.cancel()
		go func() {
			<-gu.done
			gu.con.say(shutdownLines(gu.os)...)
			gu.env().Serial.Hangup(gu.vmi.Namespace, gu.vmi.Name, string(gu.vmi.UID))
		}()
	})
}

// userdata reads the cloud-init ConfigDrive Secret CAPK wrote for the VMI. Under
// provider-id-missing a Talos guest takes no host name from the instance metadata and names
// itself as Talos does then, talos-<3>-<3>: its Node is not named like the VMI.
func (gu *guest) userdata(ctx context.Context, pool standin.Pool, known bool) (bootdata.Data, error) {
	raw, err := gu.rawUserdata(ctx)
	if err != nil {
		return bootdata.Data{}, err
	}
	d, err := bootdata.Parse(raw)
	if err == nil && d.OS == names.OSTalos && d.Hostname == "" && known && pool.Active(gu.env(), faults.ProviderIDMissing) {
		id := hex.EncodeToString(machineID(gu.vmi))[:6]
		d.Hostname = "talos-" + id[:3] + "-" + id[3:]
	}
	return d, err
}

// rawUserdata is the user data of the Secret the VMI's cloudInitConfigDrive volume names: what
// virt-launcher writes to the config drive's openstack/latest/user_data.
func (gu *guest) rawUserdata(ctx context.Context) ([]byte, error) {
	for _, v := range gu.vmi.Spec.Volumes {
		cd := v.CloudInitConfigDrive
		if cd == nil || cd.UserDataSecretRef == nil {
			continue
		}
		var sec corev1.Secret
		if err := gu.g.c.Get(ctx, client.ObjectKey{Namespace: gu.vmi.Namespace, Name: cd.UserDataSecretRef.Name}, &sec); err != nil {
			return nil, fmt.Errorf("secret %s: %w", cd.UserDataSecretRef.Name, err)
		}
		return sec.Data["userdata"], nil
	}
	return nil, fmt.Errorf("VMI %s/%s has no cloudInitConfigDrive volume with a userDataSecretRef", gu.vmi.Namespace, gu.vmi.Name)
}

// nodeName is the name the kubelet registers: the data's, else the host's (a Kairos template
// of the machine id, a Talos name), else the instance's from the ConfigDrive metadata.
func nodeName(d bootdata.Data, vmi *kubevirtv1.VirtualMachineInstance) string {
	if d.NodeName != "" {
		return d.NodeName
	}
	if h := d.Hostname; h != "" {
		return strings.ReplaceAll(h, "{{ trunc 4 .MachineID }}", hex.EncodeToString(machineID(vmi))[:4])
	}
	if vmi.Spec.Hostname != "" {
		return vmi.Spec.Hostname
	}
	return vmi.Name
}

func machineID(vmi *kubevirtv1.VirtualMachineInstance) []byte {
	b := []byte(strings.ReplaceAll(string(vmi.UID), "-", ""))
	if len(b) < 4 {
		b = make([]byte, 4)
		_, _ = rand.Read(b)
	}
	return b
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
