package verdict

import (
	"encoding/json"
	"fmt"
	"os"
)

// KeptFile is the file a suite writes into its artifacts folder when it kept what it created
// (E2E_KEEP): what the orchestrator prints for a person to reach it. It holds paths and names,
// never a credential.
const KeptFile = "kept.json"

// Kept is what a suite left standing for a person to inspect.
type Kept struct {
	// Reason is why it was kept ("E2E_KEEP=1", "E2E_KEEP=on-failure and the run failed").
	Reason string `json:"reason"`
	// Tenant is the Tenant app (in tenant-root) and Namespace its namespace on the management
	// cluster.
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	// Clusters are the tenant clusters, each with a kubeconfig file outside the artifacts
	// (empty when the suite never reached it).
	Clusters []KeptCluster `json:"clusters"`
	// Pools are the failed pools and their objects.
	Pools []KeptPool `json:"pools,omitempty"`
	// Classes are the NodeGroupClasses the run created.
	Classes []string `json:"classes,omitempty"`
}

// KeptCluster is one tenant cluster.
type KeptCluster struct {
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// KeptPool is a failed pool with the names of its objects on the management cluster.
type KeptPool struct {
	Pool              string   `json:"pool"`
	Cluster           string   `json:"cluster"`
	Failure           string   `json:"failure"` // its class and stage ("join-rejected at join")
	MachineDeployment string   `json:"machineDeployment"`
	Machines          []string `json:"machines"`
	VMIs              []string `json:"vmis"`
}

// Write writes k as path.
func (k Kept) Write(path string) error {
	data, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadKept reads a kept.json.
func ReadKept(path string) (Kept, error) {
	var k Kept
	data, err := os.ReadFile(path)
	if err != nil {
		return k, err
	}
	if err := json.Unmarshal(data, &k); err != nil {
		return k, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
