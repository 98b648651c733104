package realupstream

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// ChartVersion is one tenant Kubernetes version the chart offers: the key an app's
// spec.version takes and the release the chart renders for it.
type ChartVersion struct {
	Version, Patch string
}

// ChartVersions are the tenant versions the Kubernetes chart in dir offers, in the order of its
// values schema: the enum of `version` (Cozystack v1.6.1
// packages/apps/kubernetes/values.schema.json:172-183), each with the release its
// files/versions.yaml maps it to (templates/_versions.tpl:1-7 refuses a key the map lacks).
// A key the schema offers and the map lacks is an error: the chart would refuse to render it.
func ChartVersions(dir string) ([]ChartVersion, error) {
	data, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes chart's values schema: %w (run `make tools`)", err)
	}
	var schema struct {
		Properties struct {
			Version struct {
				Enum []string `json:"enum"`
			} `json:"version"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "values.schema.json"), err)
	}
	if len(schema.Properties.Version.Enum) == 0 {
		return nil, fmt.Errorf("%s: properties.version has no enum", filepath.Join(dir, "values.schema.json"))
	}
	data, err = os.ReadFile(filepath.Join(dir, "files", "versions.yaml"))
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes chart's version map: %w (run `make tools`)", err)
	}
	patches := map[string]string{}
	if err := yaml.Unmarshal(data, &patches); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "files", "versions.yaml"), err)
	}
	out := make([]ChartVersion, 0, len(schema.Properties.Version.Enum))
	for _, v := range schema.Properties.Version.Enum {
		p, ok := patches[v]
		if !ok {
			return nil, fmt.Errorf("%s: the schema offers %s, which files/versions.yaml does not map", dir, v)
		}
		out = append(out, ChartVersion{Version: v, Patch: p})
	}
	return out, nil
}

// ChartVersions are what the Kubernetes chart `make tools` kept offers (ChartVersions).
func (b *Build) ChartVersions() ([]ChartVersion, error) { return ChartVersions(b.ChartDir()) }
