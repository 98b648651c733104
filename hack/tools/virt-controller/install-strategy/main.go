// Command install-strategy prints what KubeVirt's virt-operator installs for a KubeVirt CR: its
// CustomResourceDefinitions (KubeVirt's own, which the operator's manifests carry, and those the
// operator creates), the virt-controller and virt-api Deployments (their arguments and the CR's
// infra placement), the admission webhook configurations and the subresource APIServices with
// the CA bundle of the certificates it issued, and what a real Node needs besides (node.go: the
// virt-handler DaemonSet, the service accounts, RBAC and Services, the certificate Secrets and
// CA ConfigMaps, issued as the operator issues them), as one JSON List. It calls virt-operator's
// own code (kubevirt.io/kubevirt v1.8.4 pkg/virt-operator/resource/generate/install/strategy.go
// GenerateCurrentInstallStrategy, with the deployment configuration
// pkg/virt-operator/util/config.go GetTargetConfigFromKV derives from the CR and from
// virt-operator's environment), so the sim installs and runs exactly that.
//
//	VIRT_OPERATOR_IMAGE=quay.io/kubevirt/virt-operator:v1.8.4 KUBEVIRT_VERSION=v1.8.4 \
//	  install-strategy <kubevirt-cr.yaml
//
// The two variables are the ones virt-operator's Deployment carries (config.go getConfig reads
// them: the image registry and tag of every component come from the operator's image).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/util/yaml"
	v1 "kubevirt.io/api/core/v1"

	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/install"
	operatorutil "kubevirt.io/kubevirt/pkg/virt-operator/util"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "install-strategy:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	for _, v := range []string{operatorutil.VirtOperatorImageEnvName, operatorutil.KubeVirtVersionEnvName} {
		if os.Getenv(v) == "" {
			return fmt.Errorf("%s is not set (virt-operator's Deployment sets it)", v)
		}
	}
	kv := &v1.KubeVirt{}
	if err := yaml.NewYAMLOrJSONDecoder(in, 4096).Decode(kv); err != nil {
		return fmt.Errorf("reading the KubeVirt CR on stdin: %w", err)
	}
	if kv.Kind != "KubeVirt" || kv.Namespace == "" {
		return fmt.Errorf("stdin holds a %q named %s/%s, not a namespaced KubeVirt", kv.Kind, kv.Namespace, kv.Name)
	}
	config := operatorutil.GetTargetConfigFromKV(kv)
	strategy, err := install.GenerateCurrentInstallStrategy(config, "", kv.Namespace)
	if err != nil {
		return err
	}
	// The KubeVirt CRD is in virt-operator's own manifests, not in its strategy
	// (tools/resource-generator --type=kv prints it from the same function).
	kvCRD, err := components.NewKubeVirtCrd()
	if err != nil {
		return err
	}
	node, caBundle, err := nodeObjects(kv, strategy)
	if err != nil {
		return err
	}
	objs := []any{kvCRD}
	for _, o := range strategy.CRDs() {
		objs = append(objs, o)
	}
	for _, o := range strategy.ControllerDeployments() {
		objs = append(objs, deploymentAsCreated(kv, o.DeepCopy()))
	}
	for _, o := range strategy.ApiDeployments() {
		objs = append(objs, deploymentAsCreated(kv, o.DeepCopy()))
	}
	objs = append(objs, withCABundle(kv, strategy, caBundle)...)
	objs = append(objs, node...)
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}
	w := bufio.NewWriter(out)
	if err := json.NewEncoder(w).Encode(list); err != nil {
		return err
	}
	return w.Flush()
}
