package realupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtcore "kubevirt.io/api/core"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/yamldoc"
)

// KubeVirtNamespace is the namespace virt-controller runs for, and so where its KubeVirt CR must
// be: outside a pod it has no service account namespace file and falls back to "kubevirt"
// (kubevirt.io/client-go v1.8.4 util/util.go lines 10-22, read by pkg/virt-controller/watch/
// application.go line 317); Cozystack installs KubeVirt in cozy-kubevirt (v1.6.1
// packages/system/kubevirt/templates/kubevirt-cr.yaml line 6).
const KubeVirtNamespace = "kubevirt"

// KubeVirt is what virt-operator installs for the platform's KubeVirt CR, as its own code computes
// it (install-strategy, hack/tools/virt-controller): the CRDs, the virt-controller and virt-api
// Deployments, virt-api's admission webhooks and the subresource APIServices.
type KubeVirt struct {
	// CR is the platform's KubeVirt CR, in KubeVirtNamespace.
	CR *kubevirtv1.KubeVirt
	// CRDs are KubeVirt's CustomResourceDefinitions.
	CRDs []CRD
	// Controller and API are the Deployments virt-operator makes of virt-controller and virt-api.
	Controller, API *appsv1.Deployment
	// Webhooks and APIServices are the rest of what install-strategy printed (admission webhook
	// configurations, APIServices), by kind.
	Webhooks, APIServices []*unstructured.Unstructured
	// Handler is the virt-handler DaemonSet as virt-operator creates it for the CR.
	Handler *appsv1.DaemonSet
	// NodeSide is what virt-operator installs before its workloads start: service accounts,
	// RBAC, Services, the certificate Secrets it issued and the CA ConfigMaps (install-strategy's
	// node.go), and the PriorityClass of its manifests (operatorManifest). A lane with a real
	// Node applies them (ApplyVirtHandler); the stand-ins need none.
	NodeSide []*unstructured.Unstructured
}

// KubeVirtCR is the KubeVirt CR the platform installs: Cozystack v1.6.1's kubevirt package
// template (packages/system/kubevirt/templates/kubevirt-cr.yaml) rendered with its chart values
// (packages/system/kubevirt/values.yaml) and the value the platform adds, cpuAllocationRatio from
// its resources.cpuAllocationRatio, 10 (packages/core/platform/values.yaml line 498, set on the
// package by templates/bundles/iaas.yaml lines 6-7), in KubeVirtNamespace. The template uses
// Go templates with two Helm functions, toYaml and nindent, which are given here as Helm defines
// them.
func (b *Build) KubeVirtCR() (*kubevirtv1.KubeVirt, error) {
	const (
		tmplRel   = "packages/system/kubevirt/templates/kubevirt-cr.yaml"
		valuesRel = "packages/system/kubevirt/values.yaml"
		platRel   = "packages/core/platform/values.yaml"
	)
	read := func(rel string) ([]byte, error) {
		data, err := os.ReadFile(b.Src("cozystack", filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("upstream: %w; run `make tools`", err)
		}
		return data, nil
	}
	values := map[string]any{}
	var platform struct {
		Resources struct {
			CPUAllocationRatio json.Number `json:"cpuAllocationRatio"`
		} `json:"resources"`
	}
	for _, step := range []func() error{
		func() error {
			data, err := read(valuesRel)
			if err != nil {
				return err
			}
			return yaml.Unmarshal(data, &values)
		},
		func() error {
			data, err := read(platRel)
			if err != nil {
				return err
			}
			return yaml.Unmarshal(data, &platform)
		},
	} {
		if err := step(); err != nil {
			return nil, fmt.Errorf("upstream: the platform's KubeVirt values: %w", err)
		}
	}
	if r, err := platform.Resources.CPUAllocationRatio.Int64(); err == nil && r != 0 {
		values["cpuAllocationRatio"] = r
	}
	src, err := read(tmplRel)
	if err != nil {
		return nil, err
	}
	t, err := template.New(tmplRel).Option("missingkey=zero").Funcs(template.FuncMap{
		// helm.sh/helm/v3 pkg/engine/funcs.go: toYAML marshals and trims the final newline;
		// nindent is sprig's: a newline, then every line indented.
		"toYaml": func(v any) string {
			data, err := yaml.Marshal(v)
			if err != nil {
				return ""
			}
			return strings.TrimSuffix(string(data), "\n")
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
	}).Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", tmplRel, err)
	}
	var out bytes.Buffer
	if err := t.Execute(&out, map[string]any{"Values": values}); err != nil {
		return nil, fmt.Errorf("upstream: rendering %s: %w", tmplRel, err)
	}
	kv := &kubevirtv1.KubeVirt{}
	if err := yaml.UnmarshalStrict(out.Bytes(), kv); err != nil {
		return nil, fmt.Errorf("upstream: %s rendered to something that is not a KubeVirt: %w", tmplRel, err)
	}
	kv.Namespace = KubeVirtNamespace
	return kv, nil
}

// operatorEnv is the environment virt-operator's Deployment gives it that names the images it
// installs (kubevirt.io/kubevirt v1.8.4 pkg/virt-operator/util/config.go getConfig): Cozystack
// v1.6.1 packages/system/kubevirt-operator/templates/kubevirt-operator.yaml, the virt-operator
// Deployment (VIRT_OPERATOR_IMAGE and KUBEVIRT_VERSION, lines 8538-8545).
func (b *Build) operatorEnv() ([]string, error) {
	docs, err := b.operatorDocs()
	if err != nil {
		return nil, err
	}
	for _, doc := range docs {
		if !bytes.Contains(doc, []byte("kind: Deployment")) {
			continue
		}
		d := &appsv1.Deployment{}
		if err := yaml.Unmarshal(doc, d); err != nil || d.Kind != "Deployment" || d.Name != "virt-operator" {
			continue
		}
		var env []string
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "VIRT_OPERATOR_IMAGE" || e.Name == "KUBEVIRT_VERSION" {
					env = append(env, e.Name+"="+e.Value)
				}
			}
		}
		if len(env) != 2 {
			return nil, fmt.Errorf("upstream: %s: the virt-operator Deployment sets %v, not VIRT_OPERATOR_IMAGE and KUBEVIRT_VERSION", operatorManifestRel, env)
		}
		return env, nil
	}
	return nil, fmt.Errorf("upstream: %s holds no virt-operator Deployment", operatorManifestRel)
}

// KubeVirtInstall runs install-strategy (built by `make tools` from hack/tools/virt-controller)
// on the platform's KubeVirt CR with virt-operator's environment: virt-operator's own
// GenerateCurrentInstallStrategy then says what it would install.
func (b *Build) KubeVirtInstall(ctx context.Context) (*KubeVirt, error) {
	cr, err := b.KubeVirtCR()
	if err != nil {
		return nil, err
	}
	return b.KubeVirtInstallFor(ctx, cr)
}

// KubeVirtInstallFor is KubeVirtInstall for a KubeVirt CR of the caller's (the platform's with a
// lane's changes).
func (b *Build) KubeVirtInstallFor(ctx context.Context, cr *kubevirtv1.KubeVirt) (*KubeVirt, error) {
	env, err := b.operatorEnv()
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(cr)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, b.Path(InstallStrategyBinary))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("upstream: %s: %w: %s", b.Path(InstallStrategyBinary), err, lastLines(stderr.String(), 5))
	}
	kv, err := decodeInstall(stdout.Bytes(), b.Component("virt-controller"))
	if err != nil {
		return nil, err
	}
	kv.CR = cr
	pcs, err := b.operatorManifest("PriorityClass")
	if err != nil {
		return nil, err
	}
	kv.NodeSide = append(pcs, kv.NodeSide...)
	return kv, nil
}

// operatorManifest are the objects of kind in the manifest the platform installs virt-operator
// from (Cozystack v1.6.1 packages/system/kubevirt-operator/templates/kubevirt-operator.yaml):
// the PriorityClass kubevirt-cluster-critical its components run at (lines 6911-6918, KubeVirt's
// tools/resource-generator --type=priorityclass) is there, not in the install strategy, and the
// DaemonSet controller refuses virt-handler's Pod without it.
func (b *Build) operatorManifest(kind string) ([]*unstructured.Unstructured, error) {
	docs, err := b.operatorDocs()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, doc := range docs {
		if !bytes.Contains(doc, []byte("kind: "+kind)) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("upstream: %s: %w", operatorManifestRel, err)
		}
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("upstream: %s holds no %s", operatorManifestRel, kind)
	}
	return out, nil
}

// operatorManifestRel is the platform's virt-operator manifest in the Cozystack source.
const operatorManifestRel = "packages/system/kubevirt-operator/templates/kubevirt-operator.yaml"

// operatorDocs are the YAML documents of the platform's virt-operator manifest.
func (b *Build) operatorDocs() ([][]byte, error) {
	data, err := os.ReadFile(b.Src("cozystack", filepath.FromSlash(operatorManifestRel)))
	if err != nil {
		return nil, fmt.Errorf("upstream: %w; run `make tools`", err)
	}
	docs, err := yamldoc.Split(data)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", operatorManifestRel, err)
	}
	return docs, nil
}

// decodeInstall sorts install-strategy's List by kind.
func decodeInstall(data []byte, comp Component) (*KubeVirt, error) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("upstream: install-strategy's output: %w", err)
	}
	source := comp.Module + "@" + comp.Version + " pkg/virt-operator/resource/generate (install-strategy)"
	kv := &KubeVirt{}
	for _, raw := range list.Items {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, err
		}
		var err error
		switch head.Kind {
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err = json.Unmarshal(raw, crd)
			kv.CRDs = append(kv.CRDs, CRD{Source: source, CRD: crd})
		case "Deployment":
			d := &appsv1.Deployment{}
			err = json.Unmarshal(raw, d)
			switch d.Name {
			case "virt-controller":
				kv.Controller = d
			case "virt-api":
				kv.API = d
			}
		case "DaemonSet":
			ds := &appsv1.DaemonSet{}
			err = json.Unmarshal(raw, ds)
			if ds.Name == "virt-handler" {
				kv.Handler = ds
			}
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Secret", "ConfigMap":
			u := &unstructured.Unstructured{}
			err = json.Unmarshal(raw, &u.Object)
			kv.NodeSide = append(kv.NodeSide, u)
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService":
			u := &unstructured.Unstructured{}
			err = json.Unmarshal(raw, &u.Object)
			if head.Kind == "APIService" {
				kv.APIServices = append(kv.APIServices, u)
			} else {
				kv.Webhooks = append(kv.Webhooks, u)
			}
		default:
			err = fmt.Errorf("unexpected kind")
		}
		if err != nil {
			return nil, fmt.Errorf("upstream: install-strategy's %s %s: %w", head.Kind, head.Metadata.Name, err)
		}
	}
	if kv.Controller == nil || len(kv.CRDs) == 0 {
		return nil, fmt.Errorf("upstream: install-strategy printed no virt-controller Deployment or no CRD")
	}
	return kv, nil
}

// VirtControllerCDICRDs are the CDI kinds virt-controller informs on, besides DataVolume, once
// DataVolumes are served: CDI, CDIConfig, DataSource and StorageProfile (kubevirt.io/kubevirt
// v1.8.4 pkg/virt-controller/watch/application.go lines 404-410; its VM and VMI controllers wait
// for them to sync before they start: watch/vm/vm.go lines 179-183, watch/vmi/vmi.go lines
// 112-116). Each is CDI v1.64.0's own, as its operator installs it: the YAML its
// pkg/operator/resources/crds_generated.go holds under the kind's name.
func (b *Build) VirtControllerCDICRDs() ([]CRD, error) {
	all, err := b.CDICRDs()
	if err != nil {
		return nil, err
	}
	want := map[string]bool{"cdis.cdi.kubevirt.io": true, "cdiconfigs.cdi.kubevirt.io": true,
		"datasources.cdi.kubevirt.io": true, "storageprofiles.cdi.kubevirt.io": true}
	var out []CRD
	for _, c := range all {
		if want[c.CRD.Name] {
			out = append(out, c)
		}
	}
	if len(out) != len(want) {
		return nil, fmt.Errorf("upstream: CDI's CRDs hold %d of the %d kinds virt-controller informs on", len(out), len(want))
	}
	return out, nil
}

// KubeVirtGroup reports whether group is one of KubeVirt's API groups (kubevirt.io and its
// subgroups: snapshot, instancetype, pool, migrations, export, clone, backup), not CDI's
// (cdi.kubevirt.io and its subgroups).
func KubeVirtGroup(group string) bool {
	if group == kubevirtcore.GroupName {
		return true
	}
	return strings.HasSuffix(group, "."+kubevirtcore.GroupName) && group != "cdi."+kubevirtcore.GroupName &&
		!strings.HasSuffix(group, ".cdi."+kubevirtcore.GroupName)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
