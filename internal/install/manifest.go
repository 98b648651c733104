package install

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/yamldoc"
)

// maxManifest bounds what Fetch reads: a release manifest is a few MiB at most.
const maxManifest = 64 << 20

// Manifest is fetched manifest bytes with their origin and sha256.
type Manifest struct {
	Source string
	SHA256 string // "sha256:<hex>"
	Data   []byte
}

// Fetch reads a manifest from an http(s) URL or a file. When digest is a sha256 pin the bytes
// must match it; "unknown" or empty accepts them and the caller records the sha256 it saw.
func Fetch(ctx context.Context, source, digest string) (*Manifest, error) {
	var data []byte
	switch {
	case strings.HasPrefix(source, "https://") || strings.HasPrefix(source, "http://"):
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, source, nil)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", source, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", source, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("manifest %s: the server answered %s", source, resp.Status)
		}
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxManifest+1))
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", source, err)
		}
	default:
		var err error
		data, err = os.ReadFile(source)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", source, err)
		}
	}
	if len(data) > maxManifest {
		return nil, fmt.Errorf("manifest %s: larger than %d MiB; not a manifest", source, maxManifest>>20)
	}
	m := newManifest(source, data)
	if digest != "" && digest != lane.DigestUnknown && digest != m.SHA256 {
		return nil, fmt.Errorf("manifest %s: sha256 is %s, the platform source pins %s; the asset changed or the pin is wrong", source, m.SHA256, digest)
	}
	return m, nil
}

func newManifest(source string, data []byte) *Manifest {
	sum := sha256.Sum256(data)
	return &Manifest{Source: source, SHA256: "sha256:" + hex.EncodeToString(sum[:]), Data: data}
}

// Objects decodes every non-empty YAML document of the manifest.
func (m *Manifest) Objects() ([]Object, error) { return Decode(m.Source, m.Data) }

// Decode reads a multi-document YAML manifest into objects; each must carry apiVersion, kind
// and name. A List is flattened.
func Decode(source string, data []byte) ([]Object, error) {
	docs, err := yamldoc.Split(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	var out []Object
	for i, doc := range docs {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		at := fmt.Sprintf("%s#%d", source, i)
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			for j := range list.Items {
				out = append(out, Object{Source: fmt.Sprintf("%s[%d]", at, j), Obj: &list.Items[j]})
			}
			continue
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: apiVersion, kind and metadata.name are required (have %q, %q, %q)", at, u.GetAPIVersion(), u.GetKind(), u.GetName())
		}
		out = append(out, Object{Source: at, Obj: u})
	}
	return out, nil
}
