package diag

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Leak is a secret value found in an artifact.
type Leak struct {
	// Path is relative to the scanned folder; Offset is the byte where the value starts.
	Path   string
	Offset int64
	// Needle says which value matched, without repeating it: its position in the list and
	// the form found (raw, base64).
	Needle int
	Form   string
}

func (l Leak) String() string {
	return fmt.Sprintf("%s at byte %d: secret value #%d (%s)", l.Path, l.Offset, l.Needle, l.Form)
}

// LeakError lists every leak a scan found.
type LeakError struct {
	Dir   string
	Leaks []Leak
}

func (e *LeakError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "artifacts %s hold a secret value in %d place(s); the writer that produced them must scrub it (internal/diag.Artifacts):", e.Dir, len(e.Leaks))
	for i, l := range e.Leaks {
		if i == 10 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e.Leaks)-10)
			break
		}
		b.WriteString("\n  " + l.String())
	}
	return b.String()
}

// Scan reads every file under dir and returns a *LeakError when any needle appears in one,
// raw or base64-encoded (the sim's canary, the learned Secret values). Needles shorter than
// the redactor scrubs are refused: scanning for them would find ordinary words.
func Scan(dir string, needles ...string) error {
	type form struct {
		needle int
		name   string
		b      []byte
	}
	var forms []form
	for i, n := range needles {
		if len(n) < minSecretLen {
			return fmt.Errorf("leak scan: secret value #%d is %d bytes; values under %d bytes are not scrubbed, so they cannot be scanned for", i, len(n), minSecretLen)
		}
		forms = append(forms,
			form{i, "raw", []byte(n)},
			form{i, "base64", []byte(base64.StdEncoding.EncodeToString([]byte(n)))},
			form{i, "base64url", []byte(base64.URLEncoding.EncodeToString([]byte(n)))},
		)
	}
	var leaks []Leak
	err := eachFile(dir, func(rel string, _ fs.FileMode, data []byte) error {
		at := map[int]bool{}
		for _, f := range forms {
			if i := bytes.Index(data, f.b); i >= 0 && !at[i] {
				at[i] = true
				leaks = append(leaks, Leak{Path: filepath.ToSlash(rel), Offset: int64(i), Needle: f.needle, Form: f.name})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("leak scan of %s: %w", dir, err)
	}
	if len(leaks) > 0 {
		sort.Slice(leaks, func(i, j int) bool { return leaks[i].Path < leaks[j].Path })
		return &LeakError{Dir: dir, Leaks: leaks}
	}
	return nil
}

// ScrubTree rewrites every file under dir that holds a value the redactor knows now, or a
// credential shape, without it. Streams write with what was known at the moment; this pass at
// the end of a run catches a value learned after a line that held it was written. It returns
// the files it changed.
func ScrubTree(dir string, r *Redactor) ([]string, error) {
	var changed []string
	err := eachFile(dir, func(rel string, mode fs.FileMode, data []byte) error {
		clean := r.Scrub(data)
		if bytes.Equal(clean, data) {
			return nil
		}
		if err := os.WriteFile(filepath.Join(dir, rel), clean, mode.Perm()); err != nil {
			return err
		}
		changed = append(changed, filepath.ToSlash(rel))
		return nil
	})
	return changed, err
}

// eachFile calls do with every regular file under dir: its path relative to dir, its mode and
// its content.
func eachFile(dir string, do func(rel string, mode fs.FileMode, data []byte) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		return do(rel, info.Mode(), data)
	})
}
