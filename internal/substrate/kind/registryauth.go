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

	"github.com/cozystack/cozy-e2e/internal/install/upstream"
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
// (never the artifacts), that every node mounts at upstream.KubeletDockerConfig.
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
// with (upstream.PlatformSourceSecretFlag).
func (a RegistryAuth) PullSecret() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	u.SetNamespace(upstream.PlatformSourceSecretNamespace)
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
