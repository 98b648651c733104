package guestos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cozystack/cozy-e2e/internal/sim/bootdata"
)

// The config drive's files, as Talos' openstack platform reads them (siderolabs/talos v1.13.6
// internal/app/machined/pkg/runtime/v1alpha1/platform/openstack/metadata.go:23-42:
// configISOLabel "config-2", configMetadataPath, configUserDataPath), which KubeVirt writes from
// the VMI's cloudInitConfigDrive volume (kubevirt.io/kubevirt v1.8.4
// pkg/cloud-init/cloud-init.go:596-598, :666).
const (
	ConfigDriveLabel = "config-2"
	userDataPath     = "openstack/latest/user_data"
	metaDataPath     = "openstack/latest/meta_data.json"
)

// Machine is what the worker knows once it read its config drive.
type Machine struct {
	// Data is the machine configuration, parsed.
	Data bootdata.Data
	// Hostname is the host's name: machine.network.hostname when the configuration sets one,
	// else the platform's (the config drive's meta_data.json hostname).
	Hostname string
	// NodeName is the name the kubelet registers under.
	NodeName string
	// NodeIP is the address the kubelet reports (set by Run from the guest's interface).
	NodeIP string
}

// metaData is the part of the config drive's meta_data.json Talos reads (openstack/metadata.go
// :79-85, MetadataConfig).
type metaData struct {
	UUID     string `json:"uuid"`
	Hostname string `json:"hostname"`
}

// ReadConfigDrive reads the machine from the config drive mounted at dir. Talos refuses a
// #cloud-config user data on this platform (openstack/openstack.go:415-435, ErrNoConfigSource),
// and so does this.
func ReadConfigDrive(dir string) (Machine, error) {
	raw, err := os.ReadFile(filepath.Join(dir, userDataPath))
	if err != nil {
		return Machine{}, fmt.Errorf("the config drive has no user data: %w", err)
	}
	var meta metaData
	if b, err := os.ReadFile(filepath.Join(dir, metaDataPath)); err == nil {
		if err := json.Unmarshal(b, &meta); err != nil {
			return Machine{}, fmt.Errorf("%s: %w", metaDataPath, err)
		}
	}
	return NewMachine(raw, meta.Hostname)
}

// NewMachine is the machine of user data raw on a platform that names the host platformHost.
func NewMachine(raw []byte, platformHost string) (Machine, error) {
	d, err := bootdata.Parse(raw)
	if err != nil {
		return Machine{}, fmt.Errorf("loading the machine configuration: %w", err)
	}
	if d.Talos == nil {
		return Machine{}, fmt.Errorf("the user data is a #cloud-config: Talos' openstack platform takes only a machine configuration from the config drive")
	}
	// The machine configuration's hostname outranks the platform's (talos
	// github.com/siderolabs/talos/pkg/machinery v1.13.6 resources/network/configlayer.go:13-19; siderolabs/talos v1.13.6
	// internal/app/machined/pkg/controllers/network/hostname_merge.go:25-35).
	host := platformHost
	if d.Hostname != "" {
		host = d.Hostname
	}
	if host == "" {
		return Machine{}, fmt.Errorf("no hostname: neither machine.network.hostname nor the config drive's meta_data.json names one")
	}
	name, err := nodeName(host)
	if err != nil {
		return Machine{}, err
	}
	return Machine{Data: d, Hostname: host, NodeName: name}, nil
}

// nodeName is the Node's name for a hostname: its short name with A-Z lower-cased, '_' made
// '-', anything else outside [a-z0-9-.] dropped, and dashes and dots trimmed from both ends
// (talos internal/app/machined/pkg/controllers/k8s/nodename.go:99-110;
// k8s/internal/nodename/nodename.go:24-55; the short name:
// github.com/siderolabs/talos/pkg/machinery v1.13.6 resources/network/hostname_spec.go:62-72, split at the first ".").
func nodeName(hostname string) (string, error) {
	short, _, _ := strings.Cut(hostname, ".")
	n := strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		case r == '_':
			return '-'
		}
		return -1
	}, short), "-.")
	if n == "" {
		return "", fmt.Errorf("could not convert hostname %q to a valid Kubernetes Node name", hostname)
	}
	return n, nil
}
