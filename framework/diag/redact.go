package diag

import (
	"bytes"
	"encoding/base64"
	"regexp"
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

var (
	bearer = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9\-._~+/]+=*`)
	// Kubernetes bootstrap tokens: [a-z0-9]{6}.[a-z0-9]{16}.
	bootstrapToken = regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`)
	// JSON web tokens (service account tokens).
	jwt = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)
	// Long base64 runs: decoded and scrubbed when they hide a key, a kubeconfig or a token.
	base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{64,}={0,2}`)

	pemBegin = []byte("-----BEGIN ")
	pemEnd   = []byte("-----END ")
)

// sensitiveDecoded are markers that make a decoded base64 run a credential.
var sensitiveDecoded = [][]byte{
	[]byte("PRIVATE KEY"), []byte("client-key-data"), []byte("token:"), []byte("password"),
	[]byte("BEGIN CERTIFICATE"), []byte("secretbox"), []byte("aescbc"),
}

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

// scrubShapes removes credentials recognised by their shape. Every pattern is found by a plain
// scan first and confirmed by a small regular expression only where the scan hit, so the cost
// per streamed byte stays low (see BenchmarkScrubConsoleMegabyte).
func scrubShapes(text string) string {
	lower := strings.ToLower(text)
	if hasAny(lower, credentialKeys) {
		text = scrubCredentialFields(text, lower)
		lower = strings.ToLower(text)
	}
	if strings.Contains(lower, "bearer") {
		text = bearer.ReplaceAllString(text, "${1}"+Redacted)
	}
	if strings.Contains(text, "eyJ") {
		text = jwt.ReplaceAllString(text, Redacted+" (token)")
	}
	if strings.IndexByte(text, '.') >= 0 && hasBootstrapToken(text) {
		text = bootstrapToken.ReplaceAllString(text, Redacted+" (bootstrap token)")
	}
	if hasBase64Run(text, 64) {
		text = base64Run.ReplaceAllStringFunc(text, func(m string) string {
			dec, err := base64.StdEncoding.DecodeString(padBase64(m))
			if err != nil {
				return m
			}
			for _, mark := range sensitiveDecoded {
				if bytes.Contains(dec, mark) {
					return Redacted + " (encoded credential)"
				}
			}
			return m
		})
	}
	return text
}

// credentialKeys are the field names whose value is a credential, lower case. A longer name
// containing one (client-key-data, refresh-token, private-key) is caught by its tail.
var credentialKeys = []string{"key", "token", "password", "secret", "client-certificate-data"}

// scrubCredentialFields replaces the value of every "<credential key>: <value>" or
// "<key>=<value>" field (quoted or not, YAML, JSON or flags) with Redacted, unless the value is
// plainly a name (see looksPlain).
func scrubCredentialFields(text, lower string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(lower); {
		k, at := nextKey(lower, i)
		if at < 0 {
			break
		}
		j := at + len(k)
		for j < len(lower) && (isLowerAlnum(lower[j]) || lower[j] == '-' || lower[j] == '_') {
			j++ // the field's whole name: client-key-data, secretRef
		}
		name := wordBefore(lower, j)
		if !isCredentialName(name) {
			i = j
			continue
		}
		for j < len(text) && (text[j] == '"' || text[j] == '\'' || text[j] == ' ') {
			j++
		}
		if j >= len(text) || (text[j] != ':' && text[j] != '=') {
			i = at + len(k)
			continue
		}
		j++
		for j < len(text) && (text[j] == '"' || text[j] == '\'' || text[j] == ' ' || text[j] == '\t') {
			j++
		}
		v := j
		for v < len(text) && isValueChar(text[v]) {
			v++
		}
		val := text[j:v]
		if len(val) < 8 || strings.HasPrefix(text[j:], Redacted) || looksPlain(name, val) {
			i = at + len(k)
			continue
		}
		b.WriteString(text[last:j])
		b.WriteString(Redacted)
		last, i = v, v
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// isCredentialName: the field is a credential (token, ca-key, client-key-data, db_password),
// not a reference to one (secretRef, secretName, keyRef).
func isCredentialName(name string) bool {
	for _, k := range credentialKeys {
		if name == k || strings.HasSuffix(name, "-"+k) || strings.HasSuffix(name, "_"+k) || strings.HasSuffix(name, "-"+k+"-data") {
			return true
		}
	}
	return false
}

// nextKey finds the first credential key at or after i.
func nextKey(lower string, i int) (string, int) {
	best, at := "", -1
	for _, k := range credentialKeys {
		if p := strings.Index(lower[i:], k); p >= 0 && (at < 0 || i+p < at) {
			best, at = k, i+p
		}
	}
	return best, at
}

// wordBefore is the field name ending at end: letters, digits and dashes back to a separator.
func wordBefore(lower string, end int) string {
	s := end
	for s > 0 && (isLowerAlnum(lower[s-1]) || lower[s-1] == '-' || lower[s-1] == '_') {
		s--
	}
	return lower[s:end]
}

func isValueChar(c byte) bool {
	return isBase64(c) || c == '=' || c == '.' || c == '_' || c == '-' || c == ':'
}

func hasAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// hasBootstrapToken reports a run of 6 lower-case letters or digits, a dot and 16 more.
func hasBootstrapToken(s string) bool {
	for i := 6; i+16 < len(s); i++ {
		if s[i] != '.' {
			continue
		}
		ok := true
		for j := i - 6; j < i && ok; j++ {
			ok = isLowerAlnum(s[j])
		}
		for j := i + 1; j <= i+16 && ok; j++ {
			ok = isLowerAlnum(s[j])
		}
		if ok {
			return true
		}
	}
	return false
}

func isBase64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/'
}

// hasBase64Run reports a run of at least n base64 characters.
func hasBase64Run(s string, n int) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if isBase64(s[i]) {
			if run++; run >= n {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// looksPlain keeps fields named like credentials whose value is plainly not one: a "key:"
// holding a label key or a word, a "secret:" naming a Secret.
func looksPlain(name, val string) bool {
	// Base64 and hex never hold a dot or a dash; names, label keys and Secret keys do
	// (app.kubernetes.io/name, super-admin.svc). A JWT does too, and is scrubbed by its own
	// shape. Upper case or base64 padding means a credential whatever else it holds.
	if strings.ContainsAny(val, "-.") && strings.ToLower(val) == val && !strings.ContainsAny(val, "+=") {
		return true
	}
	switch name {
	case "key", "secret", "token":
		return len(val) < 20 || strings.ContainsAny(val, "-.")
	}
	return false
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
