package diag

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
)

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
