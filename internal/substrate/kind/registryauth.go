package kind

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// The environment that logs the run in to the platform's registry, where a pull request's
// images and packages artifact are (the reusable workflow's registry secrets).
const (
	RegistryEnv         = "E2E_PLATFORM_REGISTRY"
	RegistryUsernameEnv = "E2E_PLATFORM_REGISTRY_USERNAME"
	RegistryPasswordEnv = "E2E_PLATFORM_REGISTRY_PASSWORD"
)

// PlatformSourceSecretName is the Secret in cozy-system the operator's packages source pulls
// with when the run has registry credentials.
const PlatformSourceSecretName = "cozy-e2e-platform-registry"

// kubeletDockerConfigFile is the docker config.json on the runner, in the run's work folder
// (never the artifacts), that every node mounts at assumptions.KubeletDockerConfig.
const kubeletDockerConfigFile = "kubelet-docker-config.json"

// RegistryAuth is a login to the platform's registry.
type RegistryAuth struct {
	Registry, Username, Password string
}

// RegistryAuthFromEnv is the login the environment gives, nil when it gives none.
func RegistryAuthFromEnv(getenv func(string) string) *RegistryAuth {
	a := RegistryAuth{Registry: getenv(RegistryEnv), Username: getenv(RegistryUsernameEnv), Password: getenv(RegistryPasswordEnv)}
	if a.Username == "" && a.Password == "" {
		return nil
	}
	return &a
}

// Host is the registry's host (and port): what a docker config's auths are keyed by.
func (a RegistryAuth) Host() string {
	host, _, _ := strings.Cut(a.Registry, "/")
	return host
}

// Check says what is missing for the login to be used.
func (a RegistryAuth) Check() error {
	switch {
	case a.Registry == "" || a.Host() == "":
		return fmt.Errorf("%s is not set: registry credentials need the registry they are for", RegistryEnv)
	case a.Username == "" || a.Password == "":
		return fmt.Errorf("%s and %s go together", RegistryUsernameEnv, RegistryPasswordEnv)
	}
	return nil
}

func (a RegistryAuth) auth() string {
	return base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))
}

// DockerConfigJSON is a docker config.json with the login's plain credentials, as kind's guide
// asks of the file it mounts (no credential store: the node has no helper).
func (a RegistryAuth) DockerConfigJSON() []byte {
	data, _ := json.Marshal(map[string]any{"auths": map[string]any{a.Host(): map[string]string{"auth": a.auth()}}})
	return data
}

// Secrets are the values no artifact may hold: the password, the login as the config holds it,
// and the whole config (the redactor also scrubs each in base64).
func (a RegistryAuth) Secrets() []string {
	return []string{a.Password, a.Username + ":" + a.Password, a.auth(), string(a.DockerConfigJSON())}
}

// PullSecret is the kubernetes.io/dockerconfigjson Secret the operator's packages source pulls
// with (assumptions.PlatformSourceSecretFlag).
func (a RegistryAuth) PullSecret() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	u.SetNamespace(assumptions.PlatformSourceSecretNamespace)
	u.SetName(PlatformSourceSecretName)
	u.Object["type"] = string(corev1.SecretTypeDockerConfigJson)
	u.Object["data"] = map[string]any{corev1.DockerConfigJsonKey: base64.StdEncoding.EncodeToString(a.DockerConfigJSON())}
	return u
}

// writeKubeletDockerConfig writes the login's docker config.json into dir, readable by the
// run's user only, and returns its path.
func (a RegistryAuth) writeKubeletDockerConfig(dir string) (string, error) {
	p := filepath.Join(dir, kubeletDockerConfigFile)
	if err := os.WriteFile(p, a.DockerConfigJSON(), 0o600); err != nil {
		return "", fmt.Errorf("registry credentials: %w", err)
	}
	return p, os.Chmod(p, 0o600)
}

// registryFinding says where the login goes and where it does not, and refuses a lane whose
// pools import their disk from the registry the login is for. The login reaches the kubelets
// and the operator only: CDI's importer pulls a Kairos pool's disk (a DataVolume registry
// source) with the credentials of the DataVolume's own spec.source.registry.secretRef (CDI
// v1.64.0 api pkg/apis/core/v1beta1/types.go:196-212, a Secret of accessKeyId and secretKey,
// pkg/common/common.go:226-229), which the chart renders no way to set; and the platform-wide
// registries value no longer reaches tenant workers (packages/apps/kubernetes/README.md:90 at
// cozystack main).
func registryFinding(l *lane.Lane, a RegistryAuth) Finding {
	reaches := fmt.Sprintf("a login for %s goes to every node's kubelet (%s, mounted from the run's work folder) and to the operator (Secret %s/%s, %s); not to CDI's importer, which pulls the Kairos pools' disks with none, nor to tenant workers",
		a.Host(), assumptions.KubeletDockerConfig, assumptions.PlatformSourceSecretNamespace, PlatformSourceSecretName, assumptions.PlatformSourceSecretFlag)
	images := map[string]string{}
	for _, c := range l.Classes {
		if c.OS == osfamily.Kairos && c.Image != "" {
			images[c.Name] = c.Image
		}
	}
	var refused []string
	for i, p := range l.Pools {
		img, ok := images[p.Class]
		if host, _, _ := strings.Cut(img, "/"); ok && host == a.Host() {
			refused = append(refused, fmt.Sprintf("%s: pools[%d] (%s) imports its disk %s", l.File, i, p.Name, img))
		}
	}
	if len(refused) == 0 {
		return Finding{Check: "registry", OK: true, Detail: reaches}
	}
	return Finding{Check: "registry", Detail: reaches + "; " + strings.Join(refused, "; ") +
		fmt.Sprintf(" from %s, which the run logs in to: the importer would pull it without that login. Put the disk where it pulls anonymously (its class's image), or run without %s", a.Host(), RegistryUsernameEnv)}
}
