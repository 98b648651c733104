package report

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Tree is a Cluster API object tree the suites wrote as `clusterctl describe cluster` shows it:
// Path is relative to the artifacts folder, Title says whose it is, Text is the file.
type Tree struct {
	Path, Title, Text string
}

// ReadTrees reads the run's trees: the tenant clusters' (clusters/management/cluster-tree-*.txt,
// written at the end of every run) and the failed pools' (pools/<pool>/cluster-tree.txt).
func ReadTrees(dir string) ([]Tree, error) {
	var out []Tree
	for _, pattern := range []string{"clusters/management/cluster-tree-*.txt", "pools/*/cluster-tree.txt"} {
		paths, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(pattern)))
		if err != nil {
			return nil, err
		}
		sort.Strings(paths)
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				return out, err
			}
			rel, _ := filepath.Rel(dir, p)
			rel = filepath.ToSlash(rel)
			title := "cluster " + strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "cluster-tree-"), ".txt")
			if strings.HasPrefix(rel, "pools/") {
				title = "failed pool " + strings.Split(rel, "/")[1]
			}
			out = append(out, Tree{Path: rel, Title: title, Text: string(data)})
		}
	}
	return out, nil
}

// writeTrees puts each tree in summary.md, folded (GitHub renders <details>).
func writeTrees(b *strings.Builder, in SummaryInput) {
	if len(in.Trees) == 0 {
		return
	}
	b.WriteString("### Cluster API: clusterctl describe cluster\n\n")
	for _, t := range in.Trees {
		fmt.Fprintf(b, "<details><summary>%s (<a href=\"%s\">%s</a>)</summary>\n\n```text\n%s\n```\n\n</details>\n\n",
			htmlEscape(t.Title), htmlEscape(link(in.LinkBase, t.Path)), htmlEscape(t.Path), strings.TrimRight(strings.ReplaceAll(t.Text, "```", "'''"), "\n"))
	}
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
