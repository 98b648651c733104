package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Worker disk sources the chart renders: the Talos image factory for Talos pools, the
// platform's Kairos worker disk per minor for the built-in kairos class, the class's image for
// an operator class.
const (
	talosImageURL    = "https://factory.talos.dev/image/ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515/v1.13.6/openstack-amd64.raw.xz"
	kairosDiskPrefix = "ghcr.io/cozystack/cozystack/kairos-worker-"
)

// pool renders one nodeGroups entry: its MachineDeployment, MachineHealthCheck and
// KubevirtMachineTemplate, and its bootstrap template; or the chart's refusal.
func (r *renderer) pool(p string) ([]*unstructured.Unstructured, *unstructured.Unstructured, error) {
	spec := r.poolSpec[p]
	class, version, err := r.poolClass(p, spec)
	if err != nil {
		return nil, nil, err
	}
	kairos := class.OS == ClassKairos
	md := r.release + "-" + p
	kmt := r.machineTemplate(p, spec, class, version)
	bootstrap := r.bootstrapTemplate(p, spec, class, version)
	mdObj := r.machineDeployment(md, spec, version, bootstrapTemplateGVK(kairos), kmt)
	mhc, err := r.machineHealthCheck(p, md, spec)
	if err != nil {
		return nil, nil, err
	}
	if kairos && !r.live.ControlPlaneUp {
		bootstrap = nil
	}
	return []*unstructured.Unstructured{kmt, mdObj, mhc}, bootstrap, nil
}

// bootstrapTemplateGVK is the kind of bootstrap template a pool's Machines take: Kairos's on a
// Kairos class, Talos's otherwise.
func bootstrapTemplateGVK(kairos bool) schema.GroupVersionKind {
	if kairos {
		return KairosConfigTemplateGVK
	}
	return TalosConfigTemplateGVK
}

// poolClass is pool p's NodeGroupClass (Talos when unset) and the Kubernetes version its
// Machines run, or the chart's refusal: an unknown class, fields a Kairos class leaves empty
// set, a running pool switching between Talos and Kairos, a class image built for another minor.
func (r *renderer) poolClass(p string, spec map[string]any) (Class, string, error) {
	className, _ := spec["nodeGroupClassName"].(string)
	if className == "" {
		className = ClassTalos
	}
	class, ok := Class{Name: className, OS: className}, className == ClassTalos || className == ClassKairos
	if !ok {
		if class, ok = r.classes(className); !ok {
			return Class{}, "", &Refusal{Pool: p, Field: "nodeGroupClassName", Message: fmt.Sprintf("NodeGroupClass %q not found", className)}
		}
	}
	kairos := class.OS == ClassKairos
	if kairos {
		for _, f := range []string{"osImage", "kernelModules", "gpus"} {
			if !empty(spec[f]) {
				return Class{}, "", &Refusal{Pool: p, Field: f, Message: fmt.Sprintf("must be empty on a pool on Kairos class %q (%s)", class.Name, kairosRefusalReason(f))}
			}
		}
	}
	md := r.release + "-" + p
	want := bootstrapTemplateGVK(kairos).Kind
	if live := r.live.BootstrapKind[p]; (live == "TalosConfigTemplate" || live == "KairosConfigTemplate") && live != want {
		return Class{}, "", &Refusal{Pool: p, Field: "nodeGroupClassName", Message: fmt.Sprintf(
			"MachineDeployment %s runs on a %s; a running pool cannot switch between a Talos and a Kairos class (class %q is %s)", md, live, class.Name, class.OS)}
	}
	version := r.version
	if class.Image != "" {
		if minor(class.KubernetesVersion) != minor(r.version) {
			return Class{}, "", &Refusal{Pool: p, Field: "nodeGroupClassName", Message: fmt.Sprintf(
				"NodeGroupClass %q is built for Kubernetes %s, the cluster runs %s", class.Name, class.KubernetesVersion, minor(r.version))}
		}
		version = class.KubernetesVersion
	}
	return class, version, nil
}

// machineDeployment is the pool's MachineDeployment md: its autoscaler annotations, and Machines
// at version with the pool's roles as Node labels, bootstrapped from the template of kind
// bootstrapGVK named md, on KubevirtMachineTemplate kmt.
func (r *renderer) machineDeployment(md string, spec map[string]any, version string, bootstrapGVK schema.GroupVersionKind, kmt *unstructured.Unstructured) *unstructured.Unstructured {
	templateLabels := map[string]string{"cluster.x-k8s.io/cluster-name": r.release, "cluster.x-k8s.io/deployment-name": md}
	for _, role := range strs(spec["roles"]) {
		templateLabels["node-role.kubernetes.io/"+role] = ""
	}
	minR, maxR := num(spec["minReplicas"], 0), num(spec["maxReplicas"], 10)
	mdObj := object(MachineDeploymentGVK, r.app.Namespace, md, r.labels())
	mdObj.SetAnnotations(map[string]string{
		"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size":     fmt.Sprint(minR),
		"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size":     fmt.Sprint(maxR),
		"cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime":       str(r.app.Spec["maxNodeProvisionTime"], "30m"),
		"capacity.cluster-autoscaler.kubernetes.io/memory":                resourceOf(spec, "memory", "4Gi"),
		"capacity.cluster-autoscaler.kubernetes.io/cpu":                   resourceOf(spec, "cpu", "2"),
		"capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk":        str(spec["diskSize"], "20Gi"),
		"capacity.cluster-autoscaler.kubernetes.io/maxPods":               "110",
		"cluster.x-k8s.io/cluster-api-autoscaler-node-group-instancetype": str(spec["instanceType"], "u1.medium"),
	})
	mdObj.Object["spec"] = map[string]any{
		"clusterName": r.release,
		"selector":    map[string]any{"matchLabels": map[string]any{"cluster.x-k8s.io/cluster-name": r.release, "cluster.x-k8s.io/deployment-name": md}},
		"strategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{
			"maxSurge": maxR, "maxUnavailable": int64(1),
		}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": anyMap(templateLabels)},
			"spec": map[string]any{
				"clusterName":       r.release,
				"version":           version,
				"bootstrap":         map[string]any{"configRef": ref(bootstrapGVK, "", md)},
				"infrastructureRef": ref(KubevirtMachineTemplateGVK, "", kmt.GetName()),
			},
		},
	}
	return mdObj
}

// machineHealthCheck is the MachineHealthCheck md of pool p, with the cluster-wide timers as
// the app's and then the pool's own values override them, or the chart's refusal of a
// maxUnhealthy that is neither an integer nor a percentage.
func (r *renderer) machineHealthCheck(p, md string, spec map[string]any) (*unstructured.Unstructured, error) {
	mhc := object(MachineHealthCheckGVK, r.app.Namespace, md, r.labels())
	h := r.o.Health
	// The app's nodeHealthCheck, then the node group's own, override the cluster-wide values
	// (templates/cluster.yaml:821-839).
	maxUnhealthy, startup := h.MaxUnhealthy, h.NodeStartupTimeout.String()
	if nhc, ok := r.app.Spec["nodeHealthCheck"].(map[string]any); ok {
		maxUnhealthy, startup = str(nhc["maxUnhealthy"], maxUnhealthy), str(nhc["nodeStartupTimeout"], startup)
	}
	maxUnhealthy, startup = str(spec["maxUnhealthy"], maxUnhealthy), str(spec["nodeStartupTimeout"], startup)
	var mu any = maxUnhealthy
	if !strings.HasSuffix(maxUnhealthy, "%") {
		n, err := strconv.ParseInt(maxUnhealthy, 10, 32)
		if err != nil {
			return nil, &Refusal{Pool: p, Field: "maxUnhealthy", Message: fmt.Sprintf("must be a bare integer (e.g. 0, 1) or an integer percentage (e.g. 50%%), got %q", maxUnhealthy)}
		}
		mu = n
	}
	mhc.Object["spec"] = map[string]any{
		"clusterName":        r.release,
		"maxUnhealthy":       mu,
		"nodeStartupTimeout": startup,
		"selector":           map[string]any{"matchLabels": map[string]any{"cluster.x-k8s.io/cluster-name": r.release, "cluster.x-k8s.io/deployment-name": md}},
		"unhealthyConditions": []any{
			map[string]any{"type": "Ready", "status": "Unknown", "timeout": h.ReadyUnknownTimeout.String()},
			map[string]any{"type": "Ready", "status": "False", "timeout": h.ReadyFalseTimeout.String()},
		},
	}
	return mhc, nil
}

func kairosRefusalReason(field string) string {
	if field == "gpus" {
		return "the Kairos worker image carries no GPU driver"
	}
	return field + " only configures Talos workers"
}

// machineTemplate is the pool's KubevirtMachineTemplate, named by the first six hex digits of
// the sha256 of its rendered template, so any change rolls the pool.
func (r *renderer) machineTemplate(p string, spec map[string]any, class Class, version string) *unstructured.Unstructured {
	md := r.release + "-" + p
	disk := map[string]any{"http": map[string]any{"url": talosImageURL}}
	if class.OS == ClassKairos {
		image := class.Image
		if image == "" {
			image = kairosDiskPrefix + minor(version)
		}
		disk = map[string]any{"registry": map[string]any{"url": "docker://" + image}}
	}
	domain := map[string]any{
		"cpu":    map[string]any{"cores": cores(resourceNum(spec, "cpu"), 2)},
		"memory": map[string]any{"guest": resourceOf(spec, "memory", "4Gi")},
		"devices": map[string]any{
			"disks":            []any{map[string]any{"name": "system", "disk": map[string]any{"bus": "virtio"}}},
			"interfaces":       []any{map[string]any{"name": "default", "bridge": map[string]any{}}},
			"logSerialConsole": spec["logSerialConsole"] == true,
		},
	}
	if class.OS == ClassKairos {
		domain["firmware"] = map[string]any{"bootloader": map[string]any{"efi": map[string]any{"secureBoot": false}}}
	}
	storage := map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": str(spec["diskSize"], "20Gi")}}}
	if sc := str(spec["storageClass"], str(r.app.Spec["storageClass"], "")); sc != "" {
		storage["storageClassName"] = sc
	}
	vmLabels := map[string]any{"cluster.x-k8s.io/deployment-name": md, "apps.cozystack.io/application.group": "apps.cozystack.io",
		"apps.cozystack.io/application.kind": "Kubernetes", "apps.cozystack.io/application.name": r.app.Name}
	for _, role := range strs(spec["roles"]) {
		vmLabels["node-role.kubernetes.io/"+role] = ""
	}
	tmpl := map[string]any{
		"spec": map[string]any{
			"virtualMachineBootstrapCheck": map[string]any{"checkStrategy": "none"},
			"virtualMachineTemplate": map[string]any{
				"metadata": map[string]any{"namespace": r.app.Namespace, "labels": vmLabels},
				"spec": map[string]any{
					"runStrategy": "Always",
					"dataVolumeTemplates": []any{map[string]any{
						"metadata": map[string]any{"name": "disk-system", "annotations": map[string]any{"cdi.kubevirt.io/storage.usePopulator": "false"}},
						"spec":     map[string]any{"source": disk, "storage": storage},
					}},
					"template": map[string]any{
						"metadata": map[string]any{"labels": vmLabels},
						"spec": map[string]any{
							"domain":           domain,
							"evictionStrategy": "External",
							"networks":         []any{map[string]any{"name": "default", "pod": map[string]any{}}},
							"volumes":          []any{map[string]any{"name": "system", "dataVolume": map[string]any{"name": "disk-system"}}},
						},
					},
				},
			},
		},
	}
	data, _ := json.Marshal(tmpl)
	sum := sha256.Sum256(data)
	kmt := object(KubevirtMachineTemplateGVK, r.app.Namespace, md+"-"+hex.EncodeToString(sum[:])[:6], r.labels())
	kmt.Object["spec"] = map[string]any{"template": tmpl}
	return kmt
}

// bootstrapTemplate is what the talos-reconcile or kairos-reconcile Job applies: owned by the
// KamajiControlPlane, named like the MachineDeployment. The Talos one carries the full worker
// machine configuration of the chart's Job (talosWorkerConfig).
func (r *renderer) bootstrapTemplate(p string, spec map[string]any, class Class, version string) *unstructured.Unstructured {
	name := r.release + "-" + p
	apiserver := fmt.Sprintf("https://%s.%s.svc:6443", r.release, r.app.Namespace)
	if class.OS == ClassKairos {
		role := "worker"
		if r.o.Faults != nil && r.o.Faults.Active("kairos-config-refused", p, true) {
			role = "control-plane" // the provider's kubeadm path joins workers only; its webhook refuses this
		}
		t := object(KairosConfigTemplateGVK, r.app.Namespace, name, r.labels())
		password := map[string]any{"userPassword": "!"}
		if r.o.Faults != nil && r.o.Faults.Active("bootstrap-transient", p, true) {
			// The password by a Secret reference, a Secret the fault writes late.
			password = map[string]any{"userPasswordSecretRef": map[string]any{"name": name + "-password", "key": "password"}}
		}
		t.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{
			"role": role, "distribution": "kubeadm", "kubernetesVersion": version,
			"userName": "kairos", "hostnamePrefix": "",
			"kubeadm": map[string]any{"joinConfiguration": map[string]any{
				"discovery":        map[string]any{"bootstrapToken": map[string]any{"apiServerEndpoint": apiserver}},
				"nodeRegistration": map[string]any{"kubeletExtraArgs": []any{map[string]any{"name": "cloud-provider", "value": "external"}}},
				"patches":          map[string]any{"directory": "/etc/kubernetes/patches"},
			}},
		}}}
		maps.Copy(t.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any), password)
		return t
	}
	if r.live.Talos == nil {
		return nil
	}
	token := r.live.Talos.Secrets.bootstrapToken()
	t := object(TalosConfigTemplateGVK, r.app.Namespace, name, r.labels())
	t.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{
		"generateType": "none", "talosVersion": talosVersion,
		"data": talosWorkerConfig(r.live.Talos, r.release, r.app.Namespace, version, spec, token),
	}}}
	return t
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	}
	return false
}

func minor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return v
	}
	return "v" + parts[0] + "." + parts[1]
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func str(v any, def string) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return def
}

func num(v any, def int64) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case int:
		return int64(x)
	}
	return def
}

func resourceOf(spec map[string]any, name, def string) string {
	res, _ := spec["resources"].(map[string]any)
	return fmt.Sprint(orDefault(res[name], def))
}

func resourceNum(spec map[string]any, name string) any {
	res, _ := spec["resources"].(map[string]any)
	return res[name]
}

func orDefault(v any, def string) any {
	if v == nil || v == "" {
		return def
	}
	return v
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cores is domain.cpu.cores of a resources.cpu value, a number or a string ("2"): the chart
// writes the value there as it is (cozystack v1.6.1 packages/apps/kubernetes/templates/
// cluster.yaml:152); def when it is unset or unreadable.
func cores(v any, def int64) int64 {
	if s, ok := v.(string); ok {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return def
		}
		return max(q.Value(), 1)
	}
	return num(v, def)
}
