package diag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// maxLine is how much of a line without a newline is held before it is scrubbed and written.
const maxLine = 1 << 20

// Artifacts is the one writer of the artifacts folder: every collector and stream writes
// through it, so every byte is scrubbed by the same Redactor and counted against the run's
// byte bound.
type Artifacts struct {
	root     string
	redactor *Redactor
	// limit is the most bytes this writer puts into the folder (0: no bound).
	limit   int64
	written atomic.Int64
}

// NewArtifacts writes under root, scrubbing with r, putting at most limit bytes into it (0:
// no bound).
func NewArtifacts(root string, r *Redactor, limit int64) (*Artifacts, error) {
	if r == nil {
		return nil, errors.New("diag: artifacts writer without a redactor; every artifact must be scrubbed")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("artifacts folder %s: %w", root, err)
	}
	return &Artifacts{root: root, redactor: r, limit: limit}, nil
}

// Root is the artifacts folder.
func (a *Artifacts) Root() string { return a.root }

// Redactor is the writer's redactor.
func (a *Artifacts) Redactor() *Redactor { return a.redactor }

// Written is the number of bytes written so far through this writer.
func (a *Artifacts) Written() int64 { return a.written.Load() }

// Path is the absolute path of rel.
func (a *Artifacts) Path(rel string) string { return filepath.Join(a.root, filepath.FromSlash(rel)) }

// ErrLimit says a file or the whole folder reached its byte bound; what came before is kept.
var ErrLimit = errors.New("byte bound reached")

// Create opens rel for writing (truncating it), writing at most limit bytes into it (0: only
// the folder's bound applies).
func (a *Artifacts) Create(rel string, limit int64) (*File, error) {
	if strings.HasPrefix(rel, "/") || strings.Contains(rel, "..") {
		return nil, fmt.Errorf("artifact path %q must be relative and inside the artifacts folder", rel)
	}
	p := a.Path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &File{a: a, f: f, rel: rel, limit: limit}, nil
}

// WriteFile writes data to rel in one go; it reports whether the bound cut it.
func (a *Artifacts) WriteFile(rel string, data []byte, limit int64) (truncated bool, err error) {
	f, err := a.Create(rel, limit)
	if err != nil {
		return false, err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if errors.Is(werr, ErrLimit) {
		return true, cerr
	}
	return false, errors.Join(werr, cerr)
}

// WriteJSON writes v as indented JSON.
func (a *Artifacts) WriteJSON(rel string, v any, limit int64) (bool, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return false, err
	}
	return a.WriteFile(rel, append(data, '\n'), limit)
}

// File is one artifact being written: scrubbed line by line, bounded in bytes.
type File struct {
	a     *Artifacts
	f     *os.File
	rel   string
	limit int64

	mu        sync.Mutex
	buf       []byte
	state     scrubState
	n         int64 // bytes written to disk
	truncated bool
	closed    bool
}

// Rel is the file's path relative to the artifacts folder.
func (f *File) Rel() string { return f.rel }

// Write scrubs and writes p. Complete lines are written at once; a partial line waits for its
// end (or for maxLine bytes). Once the bound is reached it returns ErrLimit and drops the rest.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, fs.ErrClosed
	}
	if f.truncated {
		return 0, ErrLimit
	}
	f.buf = append(f.buf, p...)
	i := bytes.LastIndexByte(f.buf, '\n')
	switch {
	case i >= 0:
		err := f.emit(f.buf[:i+1])
		f.buf = append(f.buf[:0], f.buf[i+1:]...)
		if err != nil {
			return len(p), err
		}
	case len(f.buf) > maxLine:
		// A very long line: scrub and write all but a tail as long as the longest learned value,
		// so a value split across two writes is still seen whole.
		_, keep := f.a.redactor.current()
		cut := max(len(f.buf)-keep, 0)
		err := f.emit(f.buf[:cut])
		f.buf = append(f.buf[:0], f.buf[cut:]...)
		if err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// emit scrubs chunk and writes it within the bounds; called with mu held.
func (f *File) emit(chunk []byte) error {
	var out []byte
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		var line []byte
		if i < 0 {
			line, chunk = chunk, nil
		} else {
			line, chunk = chunk[:i+1], chunk[i+1:]
		}
		out = append(out, f.a.redactor.scrubLine(&f.state, line)...)
	}
	room := int64(len(out))
	if f.limit > 0 {
		room = min(room, f.limit-f.n)
	}
	if f.a.limit > 0 {
		// Reserve the bytes in the folder's bound before writing them.
		for {
			used := f.a.written.Load()
			r := min(room, f.a.limit-used)
			if r < 0 {
				r = 0
			}
			if f.a.written.CompareAndSwap(used, used+r) {
				room = r
				break
			}
		}
	} else {
		f.a.written.Add(room)
	}
	if room < int64(len(out)) {
		f.truncated = true
		if room > 0 {
			// Cut at the last line end inside the room, so no line is left half.
			if j := bytes.LastIndexByte(out[:room], '\n'); j >= 0 {
				f.a.written.Add(int64(j+1) - room)
				room = int64(j + 1)
			}
		}
		out = out[:room]
	}
	if len(out) > 0 {
		if _, err := f.f.Write(out); err != nil {
			return err
		}
		f.n += int64(len(out))
	}
	if f.truncated {
		return ErrLimit
	}
	return nil
}

// Flush writes a pending partial line.
func (f *File) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || len(f.buf) == 0 || f.truncated {
		return nil
	}
	err := f.emit(f.buf)
	f.buf = f.buf[:0]
	return err
}

// Patch overwrites len(b) bytes at offset off without moving the end of the file (a header
// field reserved with a fixed width, like a console file's read end). b is not scrubbed: it
// must hold only what the harness itself formats (times, counts).
func (f *File) Patch(off int64, b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fs.ErrClosed
	}
	if off+int64(len(b)) > f.n {
		return fmt.Errorf("patch of %s at %d+%d beyond its %d bytes", f.rel, off, len(b), f.n)
	}
	_, err := f.f.WriteAt(b, off)
	return err
}

// Size is the number of bytes on disk so far.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// Truncated reports whether a bound cut the file.
func (f *File) Truncated() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.truncated
}

// Close flushes and closes the file. Closing twice does nothing.
func (f *File) Close() error {
	ferr := f.Flush()
	if errors.Is(ferr, ErrLimit) {
		ferr = nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	return errors.Join(ferr, f.f.Close())
}
