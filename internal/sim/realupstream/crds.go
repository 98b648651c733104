package realupstream

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cozystack/cozy-e2e/internal/yamldoc"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// CRD is one CustomResourceDefinition and where it came from ("<module>@<version> <path>").
type CRD struct {
	Source string
	CRD    *apiextensionsv1.CustomResourceDefinition
}

// CAPKCRDs are CAPK's CRDs from its module's config/crd/bases, with the labels its
// config/crd/kustomization.yaml adds (commonLabels: the Cluster API contract labels
// cluster.x-k8s.io/<contract>: v1alpha1 and cluster.x-k8s.io/provider: kubevirt; CAPK v0.1.10,
// config/crd/kustomization.yaml lines 1-7). Cluster API resolves a provider kind's version from
// them: the label key is cluster.x-k8s.io/<contract version>, the value the provider's versions
// joined by "_" (sigs.k8s.io/cluster-api v1.13.6 internal/contract/version.go:118-144).
func (b *Build) CAPKCRDs() ([]CRD, error) { return b.kustomizedCRDs("capk") }

// CABPTCRDs are the Talos bootstrap provider's CRDs (TalosConfig, TalosConfigTemplate, serving
// v1alpha2 and v1alpha3) from its module's config/crd/bases, with the contract labels of its
// config/crd/kustomization.yaml (cluster.x-k8s.io/v1alpha3, v1alpha4, v1beta1: v1alpha3; CABPT
// v0.6.12 config/crd/kustomization.yaml lines 4-7). Its kustomization also patches both for its
// conversion webhook (patches/webhook_in_*.yaml, path /convert); InstallCRDs does that with a
// Conversion.
func (b *Build) CABPTCRDs() ([]CRD, error) { return b.kustomizedCRDs("cabpt") }

// FluxCRDs are what helm-controller needs: HelmRelease from its own module, and the sources it
// watches from source-controller at the API version helm-controller v1.6.2 requires (v1.9.0):
// HelmChart and OCIRepository (always watched) and ExternalArtifact (watched with the
// ExternalArtifact feature gate) (helm-controller v1.6.2 internal/controller/helmrelease_manager.go
// lines 145-177).
func (b *Build) FluxCRDs() ([]CRD, error) {
	var out []CRD
	hr, err := b.crdFiles("helm-controller", "config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml")
	if err != nil {
		return nil, err
	}
	out = append(out, hr...)
	for _, kind := range []string{"helmcharts", "ocirepositories", "externalartifacts"} {
		crds, err := b.crdFiles("source-controller", "config/crd/bases/source.toolkit.fluxcd.io_"+kind+".yaml")
		if err != nil {
			return nil, err
		}
		out = append(out, crds...)
	}
	return out, nil
}

// ChartCRDs are the CRDs, besides Cluster API's, CAPK's and Flux's, of the kinds the Cozystack
// v1.6.1 Kubernetes chart renders with its default addons, each from the module that serves it
// (fixtures/upstream/README.md lists them and why each is needed):
//   - WorkloadMonitor (cozystack.io/v1alpha1): the platform's cozystack-controller definitions;
//   - Certificate and Issuer (cert-manager.io/v1): the platform's cert-manager-crds chart, whose
//     templates are cert-manager v1.20.2's CRDs inside Helm guards; the guard, keep-annotation and
//     labels-include lines are removed (nothing else in them is templated);
//   - KamajiControlPlane (controlplane.cluster.x-k8s.io/v1alpha1): the Kamaji control plane
//     provider's components as the platform ships them (v0.19.0-cozystack.0), with its contract
//     label;
//   - CiliumNetworkPolicy (cilium.io/v2): Cilium v1.19.5, the version the platform ships;
//   - VirtualMachineClusterInstancetype (instancetype.kubevirt.io/v1beta1): not rendered but looked
//     up for every node group (templates/talos/talos-reconcile-job.yaml lines 506-510), and Helm's
//     lookup fails on a kind the apiserver does not serve; KubeVirt v1.8.4 (the platform's) as
//     InstancetypeCRD builds it;
//   - KeycloakClient and KeycloakClientScope (v1.edp.epam.com/v1): the Keycloak operator's, as the
//     platform ships it (packages/system/keycloak-operator); the chart renders them only with
//     oidc.mode System, but its oidc-bootstrap post-install hook deletes them by kind in every
//     mode, and `kubectl delete` of a kind the apiserver does not serve fails the hook, and with
//     it the install (templates/oidc-rbac-job.yaml: its guard, kubectl api-resources
//     --api-group, exits 0 for a group that is not served).
func (b *Build) ChartCRDs() ([]CRD, error) {
	var out []CRD
	add := func(crds []CRD, err error) error {
		out = append(out, crds...)
		return err
	}
	steps := []func() error{
		func() error {
			return add(b.crdFiles("cozystack", "packages/system/cozystack-controller/definitions/cozystack.io_workloadmonitors.yaml"))
		},
		func() error {
			return add(b.crdFiles("cozystack", "packages/system/cert-manager-crds/templates/crd-cert-manager.io_certificates.yaml"))
		},
		func() error {
			return add(b.crdFiles("cozystack", "packages/system/cert-manager-crds/templates/crd-cert-manager.io_issuers.yaml"))
		},
		func() error {
			crds, err := b.crdFiles("cozystack", "packages/system/capi-providers-cpprovider/files/control-plane-components.yaml")
			return add(pick(crds, err, "kamajicontrolplanes.controlplane.cluster.x-k8s.io"))
		},
		func() error {
			return add(b.crdFiles("cilium", "pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml"))
		},
		func() error {
			crd, err := b.InstancetypeCRD()
			return add([]CRD{crd}, err)
		},
		func() error {
			for _, kind := range []string{"keycloakclients", "keycloakclientscopes"} {
				if err := add(b.crdFiles("cozystack", "packages/system/keycloak-operator/charts/keycloak-operator/crds/v1.edp.epam.com_"+kind+".yaml")); err != nil {
					return err
				}
			}
			return nil
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// InstancetypeCRD is VirtualMachineClusterInstancetype as KubeVirt's virt-operator installs it:
// no module ships it as YAML; virt-operator builds it at run time (kubevirt.io/kubevirt v1.8.4
// pkg/virt-operator/resource/generate/components/crds.go lines 792-819: cluster-scoped, v1beta1
// served and stored, no conversion, the short names below, the label kubevirt.io of newBlankCrd
// lines 127-139) with the schema of its singular name in CRDsValidation
// (validations_generated.go line 9636), which is read here from that Go source.
func (b *Build) InstancetypeCRD() (CRD, error) {
	const rel = "pkg/virt-operator/resource/generate/components/validations_generated.go"
	comp := b.Component("kubevirt")
	source := comp.Module + "@" + comp.Version + " " + rel + " (CRDsValidation[\"virtualmachineclusterinstancetype\"]) and crds.go"
	schema, err := goMapString(b.Src("kubevirt", filepath.FromSlash(rel)), "virtualmachineclusterinstancetype")
	if err != nil {
		return CRD{}, fmt.Errorf("upstream: %s: %w", source, err)
	}
	var validation apiextensionsv1.CustomResourceValidation
	if err := yaml.UnmarshalStrict([]byte(schema), &validation); err != nil {
		return CRD{}, fmt.Errorf("upstream: %s: %w", source, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	crd.Name = "virtualmachineclusterinstancetypes.instancetype.kubevirt.io"
	crd.Labels = map[string]string{"kubevirt.io": ""}
	crd.Spec = apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "instancetype.kubevirt.io",
		Names: apiextensionsv1.CustomResourceDefinitionNames{
			Plural: "virtualmachineclusterinstancetypes", Singular: "virtualmachineclusterinstancetype",
			ShortNames: []string{"vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"},
			Kind:       "VirtualMachineClusterInstancetype", ListKind: "VirtualMachineClusterInstancetypeList",
		},
		Scope:      apiextensionsv1.ClusterScoped,
		Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		Versions:   []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true, Schema: &validation}},
	}
	return CRD{Source: source, CRD: crd}, nil
}

// goMapString is the string a Go source file gives key in a map literal ("key": `value`, or
// string literals joined with +, as generators write a backquote inside a raw string).
func goMapString(path, key string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return "", fmt.Errorf("%w; run `make tools`", err)
	}
	var value string
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok || found {
			return !found
		}
		k, kok := kv.Key.(*ast.BasicLit)
		if !kok || k.Kind != token.STRING {
			return true
		}
		if name, _ := strconv.Unquote(k.Value); name == key {
			value, err = stringConst(kv.Value)
			found = true
		}
		return true
	})
	if err != nil {
		return "", fmt.Errorf("the value of %q: %w", key, err)
	}
	if !found {
		return "", fmt.Errorf("no string for %q in a map literal", key)
	}
	return value, nil
}

// stringConst is the value of a string literal, or of literals joined with + (generated Go
// writes a backquote inside a raw string as ` + "`" + `).
func stringConst(e ast.Expr) (string, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", fmt.Errorf("a %s literal, not a string", e.Kind)
		}
		return strconv.Unquote(e.Value)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", fmt.Errorf("an expression with %s, not a string", e.Op)
		}
		x, err := stringConst(e.X)
		if err != nil {
			return "", err
		}
		y, err := stringConst(e.Y)
		return x + y, err
	case *ast.ParenExpr:
		return stringConst(e.X)
	}
	return "", fmt.Errorf("a %T, not a string constant", e)
}

// kustomizedCRDs reads config/crd/bases of a provider and adds its kustomization's commonLabels.
func (b *Build) kustomizedCRDs(name string) ([]CRD, error) {
	kpath := b.Src(name, "config", "crd", "kustomization.yaml")
	data, err := os.ReadFile(kpath)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w; run `make tools`", err)
	}
	var k struct {
		CommonLabels map[string]string `json:"commonLabels"`
		Resources    []string          `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", kpath, err)
	}
	if len(k.Resources) == 0 {
		return nil, fmt.Errorf("upstream: %s lists no resources", kpath)
	}
	var out []CRD
	for _, r := range k.Resources {
		crds, err := b.crdFiles(name, filepath.ToSlash(filepath.Join("config", "crd", r)))
		if err != nil {
			return nil, err
		}
		for _, c := range crds {
			labels := c.CRD.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			for key, v := range k.CommonLabels {
				labels[key] = v
			}
			c.CRD.SetLabels(labels)
			c.Source += " + commonLabels of config/crd/kustomization.yaml"
			out = append(out, c)
		}
	}
	return out, nil
}

// crdFiles reads every CustomResourceDefinition in a file kept from a component's module.
func (b *Build) crdFiles(name, rel string) ([]CRD, error) {
	comp := b.Component(name)
	path := b.Src(name, filepath.FromSlash(rel))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w; run `make tools`", err)
	}
	source := comp.Module + "@" + comp.Version + " " + rel
	data, err = stripHelmGuards(data)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", source, err)
	}
	crds, err := decodeCRDs(data)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", source, err)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("upstream: %s holds no CustomResourceDefinition", source)
	}
	out := make([]CRD, 0, len(crds))
	for _, c := range crds {
		out = append(out, CRD{Source: source, CRD: c})
	}
	return out, nil
}

// stripHelmGuards removes whole-line Helm actions ({{- if ... }}, {{- end }}, {{- include ... }})
// from a CRD a chart templates; any other template text is an error, so nothing rendered is
// guessed.
func stripHelmGuards(data []byte) ([]byte, error) {
	if !bytes.Contains(data, []byte("{{")) {
		return data, nil
	}
	var out bytes.Buffer
	for i, line := range bytes.Split(data, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if bytes.HasPrefix(t, []byte("{{")) && bytes.HasSuffix(t, []byte("}}")) {
			continue
		}
		if bytes.Contains(line, []byte("{{")) {
			return nil, fmt.Errorf("line %d is templated inside a line (%q): not a guard this reader may drop", i+1, t)
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// decodeCRDs reads the CustomResourceDefinitions of a multi-document YAML, skipping other kinds.
func decodeCRDs(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := yamldoc.Split(data)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for i, doc := range docs {
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if head.Kind != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

func pick(crds []CRD, err error, names ...string) ([]CRD, error) {
	if err != nil {
		return nil, err
	}
	var out []CRD
	for _, n := range names {
		found := false
		for _, c := range crds {
			if c.CRD.Name == n {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("upstream: no CRD %s in %s", n, crds[0].Source)
		}
	}
	return out, nil
}
