package install

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

// PlatformRecordFile is where a run records its platform, relative to the artifacts folder.
const PlatformRecordFile = "substrate/platform.json"

// PlatformRecord is what a run installed the platform from, for `make repro` to install the
// same: the source as given, the source pinned at the digest the run verified, and for a
// checkout its folder and commit and what the build made.
type PlatformRecord struct {
	Source  string `json:"source"`
	FromEnv bool   `json:"fromEnv,omitempty"`
	Kind    string `json:"kind"`
	// Pinned is release:<v>@sha256:<hex> or manifest:<where>@sha256:<hex>, as verified.
	Pinned string `json:"pinned,omitempty"`
	// Manifest is the operator manifest applied and its sha256.
	Manifest       string `json:"manifest,omitempty"`
	ManifestSHA256 string `json:"manifestSha256,omitempty"`
	// Checkout, CheckoutCommit: the folder a checkout source was built from, at which commit.
	Checkout       string `json:"checkout,omitempty"`
	CheckoutCommit string `json:"checkoutCommit,omitempty"`
	// RenderedSHA256 is the sha256 of the manifest `make manifests` wrote, before the harness
	// pointed it at the loaded operator image.
	RenderedSHA256 string `json:"renderedSha256,omitempty"`
	OperatorImage  string `json:"operatorImage,omitempty"`
	PackagesURL    string `json:"packagesUrl,omitempty"`
}

// NewPlatformRecord starts the record of source s.
func NewPlatformRecord(s PlatformSource) PlatformRecord {
	return PlatformRecord{Source: s.Raw, FromEnv: s.FromEnv, Kind: s.Kind, Pinned: s.Pinned(), Checkout: s.Checkout}
}

// Write writes the record into the artifacts folder dir.
func (r PlatformRecord) Write(dir string) error {
	path := filepath.Join(dir, filepath.FromSlash(PlatformRecordFile))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadPlatformRecord reads the record of the run whose artifacts are in dir; nil when the run
// installed no platform (a sim run).
func ReadPlatformRecord(dir string) (*PlatformRecord, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(PlatformRecordFile)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r PlatformRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
