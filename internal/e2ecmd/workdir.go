package e2ecmd

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func projectRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "lanes")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("run e2e from the project (no lanes/ and go.mod above %s)", dir)
		}
	}
}

func prepareArtifacts(root, dir, laneName string, started time.Time) (string, error) {
	if dir == "" {
		base := filepath.Join(root, "_artifacts")
		dir = filepath.Join(base, laneName+"-"+started.UTC().Format("20060102T150405Z"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		latest := filepath.Join(base, "latest")
		_ = os.Remove(latest)
		if err := os.Symlink(filepath.Base(dir), latest); err != nil {
			return "", err
		}
		return dir, nil
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return "", fmt.Errorf("E2E_ARTIFACTS=%s is not empty; give a new folder so runs never mix their evidence", dir)
	}
	return dir, os.MkdirAll(dir, 0o755)
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
