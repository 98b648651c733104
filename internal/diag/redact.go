package diag

import (
	"bytes"
	"encoding/base64"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Redacted replaces every scrubbed value.
const Redacted = "[redacted]"

// minSecretLen is the shortest Secret value that is scrubbed wherever it appears. Shorter ones
// ("true", "admin") would scrub ordinary words out of every artifact; the patterns below still
// catch credentials of any length by their shape.
const minSecretLen = 8

// minTokenLen is the shortest whitespace-separated piece of a multi-line Secret value (a
// kubeconfig, a machine config) that is learned on its own.
const minTokenLen = 16

// Redactor scrubs credentials out of bytes on their way to an artifact. It knows two kinds of
// credentials: values it learned (every Secret value of the clusters and namespaces involved,
// raw and base64-encoded, and the long pieces of multi-line values), and shapes (private key
// blocks, kubeconfig credential fields, bearer and bootstrap tokens, JWTs, base64 hiding any of
// them). It is safe for concurrent use.
type Redactor struct {
	mu       sync.RWMutex
	values   map[string]struct{}
	public   map[string]struct{}
	replacer *strings.Replacer
	longest  int
}

// NewRedactor returns a Redactor that knows values already.
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{values: map[string]struct{}{}, public: map[string]struct{}{}}
	r.Learn(values...)
	return r
}

// Learn adds values to scrub: each value, its base64 encodings and, for values with several
// lines or fields, every long piece on its own.
func (r *Redactor) Learn(values ...string) {
	var add []string
	for _, v := range values {
		add = append(add, expand(v)...)
	}
	if len(add) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for _, v := range add {
		if _, ok := r.values[v]; !ok {
			r.values[v] = struct{}{}
			changed = true
		}
	}
	if changed {
		r.replacer = nil
	}
}

// Public marks names that are never scrubbed, because the API shows them anyway: the names of
// objects and namespaces. A Secret value that is also an object's name (a bootstrap config
// holding its Machine's hostname, a values Secret holding the cluster's name) is not a secret,
// and scrubbing it would blank the very names the evidence is about.
func (r *Redactor) Public(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if len(n) < minSecretLen {
			continue
		}
		if _, ok := r.public[n]; ok {
			continue
		}
		r.public[n] = struct{}{}
		if _, learned := r.values[n]; learned {
			r.replacer = nil
		}
	}
}

// LearnSecret learns every value of a Secret (data and stringData).
func (r *Redactor) LearnSecret(s *corev1.Secret) {
	vals := make([]string, 0, len(s.Data)+len(s.StringData))
	for _, v := range s.Data {
		vals = append(vals, string(v))
	}
	for _, v := range s.StringData {
		vals = append(vals, v)
	}
	r.Learn(vals...)
}

// Known is how many distinct strings the Redactor scrubs by value.
func (r *Redactor) Known() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.values)
}

// Values returns the learned strings (for a leak scan of the finished artifacts).
func (r *Redactor) Values() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.values))
	for v := range r.values {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// maxWholeValue is the longest value learned whole; a longer one (a Helm release blob) is
// learned by its pieces only, which keeps the scrubber's look-behind short.
const maxWholeValue = 64 << 10

func expand(v string) []string {
	v = strings.TrimRight(v, "\r\n")
	if len(v) < minSecretLen {
		return nil
	}
	var out []string
	if len(v) <= maxWholeValue {
		out = append(out, v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)),
			base64.URLEncoding.EncodeToString([]byte(v)))
	}
	if strings.ContainsAny(v, " \t\n") {
		for _, f := range strings.Fields(v) {
			f = strings.Trim(f, `"',;`)
			if len(f) >= minTokenLen && len(f) <= maxWholeValue && !strings.Contains(f, ":") && distinct(f) >= 10 && !nameLike(f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// nameLike says a piece of a multi-line value is a Kubernetes name or a path (a hostname, an
// object name, /etc/kubernetes/patches: lower-case letters, digits, dashes, dots, slashes,
// underscores), not a credential; long hex runs (keys, hashes of secrets) are credentials all
// the same. A credential in a config is still caught by its field (password: ...).
func nameLike(f string) bool {
	hex := true
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'f':
		case c >= 'g' && c <= 'z', c == '-', c == '.', c == '/', c == '_':
			hex = false
		default:
			return false
		}
	}
	return !(hex && len(f) >= 32)
}

func distinct(s string) int {
	seen := map[rune]bool{}
	for _, c := range s {
		seen[c] = true
	}
	return len(seen)
}

func (r *Redactor) current() (*strings.Replacer, int) {
	r.mu.RLock()
	rep, longest := r.replacer, r.longest
	r.mu.RUnlock()
	if rep != nil {
		return rep, longest
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.replacer != nil {
		return r.replacer, r.longest
	}
	// Longest first, so a value is replaced whole before a piece of it.
	vals := make([]string, 0, len(r.values))
	for v := range r.values {
		if _, ok := r.public[v]; !ok {
			vals = append(vals, v)
		}
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	pairs := make([]string, 0, 2*len(vals))
	r.longest = 0
	for _, v := range vals {
		pairs = append(pairs, v, Redacted)
		r.longest = max(r.longest, len(v))
	}
	r.replacer = strings.NewReplacer(pairs...)
	return r.replacer, r.longest
}

// Scrub returns b without any learned value or credential-shaped content. It works line by
// line; a private key block spanning lines is removed whole.
func (r *Redactor) Scrub(b []byte) []byte {
	var out bytes.Buffer
	s := &scrubState{}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		var line []byte
		if i < 0 {
			line, b = b, nil
		} else {
			line, b = b[:i+1], b[i+1:]
		}
		out.Write(r.scrubLine(s, line))
	}
	return out.Bytes()
}

// scrubState carries a private key block across lines.
type scrubState struct{ inKey bool }

func (r *Redactor) scrubLine(s *scrubState, line []byte) []byte {
	if s.inKey {
		if bytes.Contains(line, pemEnd) {
			s.inKey = false
			return append([]byte(Redacted+" (private key)"), trailingNewline(line)...)
		}
		return nil
	}
	if i := bytes.Index(line, pemBegin); i >= 0 && bytes.Contains(line[i:], []byte("PRIVATE KEY")) {
		if bytes.Contains(line[i+len(pemBegin):], pemEnd) {
			return append(append(append([]byte{}, line[:i]...), Redacted+" (private key)"...), trailingNewline(line)...)
		}
		s.inKey = true
		return append([]byte{}, line[:i]...)
	}
	text := string(line)
	if rep, _ := r.current(); rep != nil {
		text = rep.Replace(text)
	}
	return []byte(scrubShapes(text))
}

func padBase64(s string) string {
	if m := len(s) % 4; m != 0 {
		return s + strings.Repeat("=", 4-m)
	}
	return s
}

func trailingNewline(line []byte) []byte {
	if bytes.HasSuffix(line, []byte("\n")) {
		return []byte("\n")
	}
	return nil
}
