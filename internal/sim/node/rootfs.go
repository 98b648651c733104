package node

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	oci "github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// capXattr is the extended attribute that holds a file's capabilities (setcap); a layer carries
// it as a PAX record (SCHILY.xattr.<name>), which containerd's unpacker writes back.
const capXattr = "security.capability"

// PackRootfs writes the folder root as a one-layer image for this machine's platform, with cfg
// as its configuration, into a new OCI image layout at out (replacing what is there), and
// returns the image's digest. Owners, modes, symlinks, hard links and file capabilities are kept;
// timestamps are fixed, so the same tree gives the same layer. /dev, /proc and /sys are packed
// empty: the runtime mounts them.
func PackRootfs(root, out string, cfg v1.Config) (v1.Hash, error) {
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return v1.Hash{}, fmt.Errorf("packing %s: not a folder (%v)", root, err)
	}
	if err := os.RemoveAll(out); err != nil {
		return v1.Hash{}, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return v1.Hash{}, err
	}
	gz := filepath.Join(out, "layer.tar.gz")
	if err := writeLayer(root, gz); err != nil {
		return v1.Hash{}, fmt.Errorf("packing %s: %w", root, err)
	}
	defer os.Remove(gz)
	layer, err := tarball.LayerFromFile(gz)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return v1.Hash{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return v1.Hash{}, err
	}
	p, err := oci.Write(out, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img); err != nil {
		return v1.Hash{}, fmt.Errorf("writing the image layout %s: %w", out, err)
	}
	return img.Digest()
}

// writeLayer tars root (sorted, as filepath.WalkDir visits it) into a gzip file at path.
func writeLayer(root, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	links := map[[2]uint64]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		// The runtime mounts /dev, /proc and /sys: only their folders go in.
		if top, _, nested := strings.Cut(filepath.ToSlash(rel), "/"); nested && (top == "dev" || top == "proc" || top == "sys") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		hdr, err := layerHeader(p, rel, links)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			return copyLayerFile(tw, p, rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// layerHeader is the tar header of p (rel from the root): its owner's ids kept, their names
// dropped, its modification time the epoch, a regular file whose other links are already in
// the layer (links, by device and inode) a hard link to the first, its file capabilities kept.
// Anything but a folder, regular file or symbolic link is refused.
func layerHeader(p, rel string, links map[[2]uint64]string) (*tar.Header, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	var target string
	if fi.Mode()&fs.ModeSymlink != 0 {
		if target, err = os.Readlink(p); err != nil {
			return nil, err
		}
	}
	hdr, err := tar.FileInfoHeader(fi, target)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	hdr.Name = filepath.ToSlash(rel)
	hdr.Uname, hdr.Gname = "", ""
	hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
	hdr.Format = tar.FormatPAX
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil {
		hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
	}
	switch {
	case fi.IsDir():
		hdr.Name += "/"
	case fi.Mode().IsRegular() && st != nil && st.Nlink > 1:
		key := [2]uint64{uint64(st.Dev), st.Ino}
		if first, ok := links[key]; ok {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
		} else {
			links[key] = hdr.Name
		}
	case !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0:
		return nil, fmt.Errorf("%s: a %s, which an image layer here does not carry", rel, fi.Mode().Type())
	}
	if fi.Mode().IsRegular() {
		if capv, ok := fileCaps(p); ok {
			hdr.PAXRecords = map[string]string{"SCHILY.xattr." + capXattr: capv}
		}
	}
	return hdr, nil
}

// copyLayerFile copies regular file p (rel from the root) into the layer after its header.
func copyLayerFile(tw *tar.Writer, p, rel string) error {
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	src.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	return nil
}

// fileCaps is the file's capability attribute, if it has one.
func fileCaps(path string) (string, bool) {
	buf := make([]byte, 64)
	n, err := syscall.Getxattr(path, capXattr, buf)
	if err != nil || n <= 0 {
		return "", false
	}
	return string(buf[:n]), true
}

// LayoutImage is the one image of the OCI image layout at dir (as PackRootfs writes it).
func LayoutImage(dir string) (v1.Image, error) {
	p, err := oci.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image layout %s: %w; run `make node-images`", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("image layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("image layout %s: %d images, want 1", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("image layout %s: %w", dir, err)
	}
	return img, nil
}
