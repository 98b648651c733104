package yamldoc

import (
	"strings"
	"testing"
)

func TestSplitKeepsEveryDocumentInPlace(t *testing.T) {
	data := "a: 1\n---\n# only a comment\n---\n\n---\nb: 2\n"
	docs, err := Split([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, strings.TrimSpace(string(d)))
	}
	want := []string{"a: 1", "# only a comment", "", "b: 2"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("documents %q, want %q", got, want)
	}
}

func TestSplitOfNothingIsNoDocuments(t *testing.T) {
	docs, err := Split(nil)
	if err != nil || len(docs) != 0 {
		t.Fatalf("Split(nil) = %q, %v; want no documents", docs, err)
	}
}
