// Package yamldoc splits multi-document YAML (documents separated by "---" lines) into its
// documents, as kubectl reads a manifest.
package yamldoc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Split returns every document of data in order, empty ones included, so that a document's
// index is its place in the file (from 0). A document that cannot be read is named by index.
func Split(data []byte) ([][]byte, error) {
	var out [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, doc)
	}
}
