package node

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// blobStore is the local registry's blob storage: the blobs of the image layouts it was given,
// read from their files (blobs/<algorithm>/<hex>, the OCI image layout), and go-containerregistry's
// in-memory store for everything pushed. A blob found in neither is the in-memory store's "not
// found", which pkg/registry answers with 404 (pkg/registry/blobs.go, errNotFound).
type blobStore struct {
	mem registry.BlobHandler

	mu      sync.Mutex
	layouts []string
}

func newBlobStore() *blobStore { return &blobStore{mem: registry.NewInMemoryBlobHandler()} }

func (b *blobStore) addLayout(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.layouts {
		if d == dir {
			return
		}
	}
	b.layouts = append(b.layouts, dir)
}

// file is the layout file holding blob h, if a layout has it.
func (b *blobStore) file(h v1.Hash) (string, os.FileInfo) {
	b.mu.Lock()
	dirs := append([]string(nil), b.layouts...)
	b.mu.Unlock()
	for _, d := range dirs {
		p := filepath.Join(d, "blobs", h.Algorithm, h.Hex)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, fi
		}
	}
	return "", nil
}

func (b *blobStore) Stat(ctx context.Context, repo string, h v1.Hash) (int64, error) {
	if _, fi := b.file(h); fi != nil {
		return fi.Size(), nil
	}
	return b.mem.(registry.BlobStatHandler).Stat(ctx, repo, h)
}

func (b *blobStore) Get(ctx context.Context, repo string, h v1.Hash) (io.ReadCloser, error) {
	if p, _ := b.file(h); p != "" {
		return os.Open(p)
	}
	return b.mem.Get(ctx, repo, h)
}

func (b *blobStore) Put(ctx context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	return b.mem.(registry.BlobPutHandler).Put(ctx, repo, h, rc)
}

func (b *blobStore) Delete(ctx context.Context, repo string, h v1.Hash) error {
	return b.mem.(registry.BlobDeleteHandler).Delete(ctx, repo, h)
}
