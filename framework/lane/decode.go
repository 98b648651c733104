package lane

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// FieldError is one problem in a lane file, located by field path and line.
type FieldError struct {
	File  string
	Path  string // budget.phases[3].ceiling
	Line  int    // 0 when not known; a line of File, never of a lane it extends
	Issue string
	// From is the file and line of the lane File extends that wrote Path, when File does not.
	From string
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	issue := e.Issue
	if e.From != "" {
		issue += fmt.Sprintf(" (%s comes from %s, which this lane extends)", e.Path, e.From)
	}
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", loc, issue)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Path, issue)
}

// Errors is every problem found in one lane file, in file order.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// scalarDecoder is implemented by types that parse themselves from a YAML scalar (Duration).
type scalarDecoder interface {
	decodeScalar(value string) error
}

// nodeDecoder is implemented by types that take more than one YAML shape (Versions).
type nodeDecoder interface {
	decodeNode(n *yaml.Node) error
}

// decoder walks a YAML node tree into Go values, keeping the field path so that
// every error names the field it is about. Unknown fields are errors.
type decoder struct {
	file  string
	errs  Errors
	lines map[string]int // field path -> line, for validation messages
	// owner is the file that wrote each node of a lane merged with the lanes it extends (nil:
	// file wrote every node); inherited the field paths another file wrote, as file:line.
	owner     map[*yaml.Node]string
	inherited map[string]string
}

// mark records where field path was written: its line when the lane's own file wrote n, else
// the file and line of the lane it extends.
func (d *decoder) mark(path string, n *yaml.Node, first bool) {
	if d.lines == nil {
		return
	}
	if f, ok := d.owner[n]; ok && f != d.file {
		if _, seen := d.inherited[path]; !seen || !first {
			d.inherited[path] = fmt.Sprintf("%s:%d", f, n.Line)
		}
		return
	}
	if _, seen := d.lines[path]; !seen || !first {
		d.lines[path] = n.Line
	}
}

func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	line := 0
	from := ""
	if n != nil {
		line = n.Line
		if f, ok := d.owner[n]; ok && f != d.file {
			line, from = 0, fmt.Sprintf("%s:%d", f, n.Line)
		}
	}
	d.errs = append(d.errs, &FieldError{File: d.file, Path: path, Line: line, From: from, Issue: fmt.Sprintf(format, args...)})
}

// decode sets v from node n at field path path: an alias by what it names, null as the zero
// value, a pointer through what it points to, a type with a decoder of its own by it, any other
// by its kind (decodeValue).
func (d *decoder) decode(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.mark(path, n, true)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(path, n, v.Elem())
		return
	}
	if d.decodeOwn(path, n, v) {
		return
	}
	d.decodeValue(path, n, v)
}

// decodeOwn decodes n into a v whose type decodes itself (nodeDecoder, scalarDecoder) and
// reports whether it did.
func (d *decoder) decodeOwn(path string, n *yaml.Node, v reflect.Value) bool {
	if nd, ok := v.Addr().Interface().(nodeDecoder); ok {
		if err := nd.decodeNode(n); err != nil {
			d.fail(path, n, "%v", err)
		}
		return true
	}
	if sd, ok := v.Addr().Interface().(scalarDecoder); ok {
		if n.Kind != yaml.ScalarNode {
			d.fail(path, n, "want a single value, found a %s", kindName(n))
			return true
		}
		if err := sd.decodeScalar(n.Value); err != nil {
			d.fail(path, n, "%v", err)
		}
		return true
	}
	return false
}

// decodeValue decodes n into v by v's kind: a struct field by field, a list item by item, a
// mapping key by key, a string, a whole number or a boolean as the scalar it must be.
func (d *decoder) decodeValue(path string, n *yaml.Node, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(path, n, v)
	case reflect.Slice:
		d.decodeSlice(path, n, v)
	case reflect.Map:
		d.decodeMap(path, n, v)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(path, n, "want a string, found a %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(n.Value, 10, 64)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.fail(path, n, "%q is not a whole number", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.fail(path, n, "%q is not true or false", n.Value)
			return
		}
		v.SetBool(b)
	default:
		d.fail(path, n, "cannot decode into %s", v.Type())
	}
}

// decodeSlice decodes a list into v, each item at path[i].
func (d *decoder) decodeSlice(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.fail(path, n, "want a list, found a %s", kindName(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(fmt.Sprintf("%s[%d]", path, i), item, out.Index(i))
	}
	v.Set(out)
}

// decodeMap decodes a mapping into v, each value at path.key.
func (d *decoder) decodeMap(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "want a mapping, found a %s", kindName(n))
		return
	}
	out := reflect.MakeMap(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(join(path, key), n.Content[i+1], elem)
		out.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), elem)
	}
	v.Set(out)
}

func (d *decoder) decodeStruct(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "want a mapping, found a %s", kindName(n))
		return
	}
	fields := structFields(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		fp := join(path, key.Value)
		idx, ok := fields[key.Value]
		if !ok {
			d.fail(fp, key, "unknown field%s", suggest(key.Value, fields))
			continue
		}
		if seen[key.Value] {
			d.fail(fp, key, "given twice")
			continue
		}
		seen[key.Value] = true
		d.mark(fp, key, false)
		d.decode(fp, val, v.Field(idx))
	}
	t := v.Type()
	for name, idx := range fields {
		if t.Field(idx).Tag.Get("lane") == "required" && !seen[name] {
			d.fail(join(path, name), n, "is required")
		}
	}
}

// structFields maps each json tag name to its field index.
func structFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = i
	}
	return out
}

func suggest(key string, fields map[string]int) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.EqualFold(name, key) || editDistance(strings.ToLower(name), strings.ToLower(key)) <= 2 {
			return fmt.Sprintf(" (did you mean %q?)", name)
		}
	}
	return fmt.Sprintf(" (known: %s)", strings.Join(names, ", "))
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	default:
		return "value"
	}
}
