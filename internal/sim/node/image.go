package node

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one file of an image layer.
type File struct {
	// Path inside the image, without a leading slash ("pause", "bin/payload").
	Path    string
	Mode    int64
	Content []byte
}

// FileImage is a one-layer image for this machine's platform holding files, with cfg as its
// configuration (entrypoint, user, ...). The layer's timestamps are fixed, so the same files make
// the same digest.
func FileImage(files []File, cfg v1.Config) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	epoch := time.Unix(0, 0)
	for _, f := range files {
		parts := strings.Split(f.Path, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/") + "/"
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.Path, Typeflag: tar.TypeReg, Mode: f.Mode, Size: int64(len(f.Content)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, cfg
	return mutate.ConfigFile(img, cf)
}

// PauseRef is the sandbox image containerd is configured with: kubeadm v1.35.4's pause version
// (k8s.io/kubernetes v1.35.4 cmd/kubeadm/app/constants/constants.go:444-445, build/pause/
// Makefile:20), under the registry the kubelet's and kubeadm's defaults name.
const PauseRef = "registry.k8s.io/pause:3.10.1"

// PauseImage is the pause image as upstream builds it from the binary build-node.sh compiled:
// k8s.io/kubernetes v1.35.4 build/pause/Dockerfile:18-20 (/pause, USER 65535:65535,
// ENTRYPOINT ["/pause"]) on scratch (build/pause/Makefile:32, BASE.linux := scratch).
func PauseImage(tools Tools) (v1.Image, error) {
	bin, err := os.ReadFile(tools.Path("pause"))
	if err != nil {
		return nil, fmt.Errorf("pause image: %w; run `make node-tools`", err)
	}
	return FileImage([]File{{Path: "pause", Mode: 0o755, Content: bin}},
		v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"})
}
