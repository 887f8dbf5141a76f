package config

import (
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A schema is the set of keys a struct type accepts.
type schema struct {
	fields []schemaField
	open   bool // an inline map takes any other key
}

type schemaField struct {
	name string
	typ  reflect.Type
}

func schemaOf(t reflect.Type) schema {
	var s schema
	if t.Kind() != reflect.Struct {
		return s
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			if ft := derefType(f.Type); ft.Kind() == reflect.Struct {
				inner := schemaOf(ft)
				s.fields = append(s.fields, inner.fields...)
				s.open = s.open || inner.open
			} else {
				s.open = true
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		s.fields = append(s.fields, schemaField{name, f.Type})
	}
	return s
}

func (s schema) field(name string) (reflect.Type, bool) {
	for _, f := range s.fields {
		if f.name == name {
			return f.typ, true
		}
	}
	return nil, false
}

func (s schema) names() []string {
	names := make([]string, len(s.fields))
	for i, f := range s.fields {
		names[i] = f.name
	}
	return names
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// isLeaf reports whether t is decoded from a single value (a scalar or a
// type that decodes itself).
func isLeaf(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		return t == reflect.TypeOf(time.Time{})
	case reflect.Map:
		return false
	case reflect.Slice, reflect.Array:
		return t.Elem().Kind() == reflect.Uint8
	}
	return true
}

// zeroNode returns a node that decodes into the zero value of t, at the
// place of n. (yaml.v3 drops a null list item of struct type.)
func zeroNode(t reflect.Type, n *yaml.Node) *yaml.Node {
	z := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	if err := z.Encode(reflect.Zero(t).Interface()); err != nil {
		z = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	z.Line, z.Column = n.Line, n.Column
	return z
}

// firstKey returns the first key struct type t accepts, for examples.
func firstKey(t reflect.Type) string {
	if names := schemaOf(t).names(); len(names) > 0 {
		return names[0]
	}
	return "key"
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// scalarKey returns the value of key in mapping n, "" if there is none.
func scalarKey(n *yaml.Node, key string) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key && n.Content[i+1].Kind == yaml.ScalarNode {
			return n.Content[i+1].Value
		}
	}
	return ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func inSuffix(in string) string {
	if in == "" {
		return ""
	}
	return " in " + in
}
