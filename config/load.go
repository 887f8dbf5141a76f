package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Marshal writes c as a configuration document that Parse reads back to
// the same configuration, with header (if any) as a leading comment. It is
// how programs (the simulator) write configurations: every value is
// quoted where YAML needs it.
func (c *Config) Marshal(header string) ([]byte, error) {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		if line != "" {
			fmt.Fprintf(&b, "# %s\n", line)
		}
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	return b.Bytes(), nil
}

// Load reads and checks the configuration file at path, and reads the
// files it names (mqtt.tls's, mqtt.password_file): a file it cannot use
// is an error at its key's line.
func Load(path string) (*Config, error) {
	c, err := LoadWithoutFiles(path)
	if err != nil {
		return nil, err
	}
	if err := c.readSecurity(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// LoadWithoutFiles is Load without reading the files the configuration
// names, for checking a configuration on another machine than the
// gateway's. Relative paths are made relative to the file's directory.
func LoadWithoutFiles(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for _, p := range append([]*string{&c.Store, &c.MQTT.PasswordFile}, c.MQTT.TLS.files()...) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return c, nil
}

var (
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	unknownKey  = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	duplicateKy = regexp.MustCompile(`^line (\d+): mapping key "([^"]*)" already defined at line (\d+)$`)
)

// Parse checks a configuration document. Relative paths are left as they
// are, and no file it names is read: Load reads them (see MQTT.Security).
//
// Every problem is reported once, at the line to edit: the document is
// parsed into a node tree first, which a walker checks against Config
// (duplicate, unknown and misspelt keys, values of the wrong shape or
// type), and only what passes is decoded and checked.
func Parse(b []byte) (*Config, error) {
	if err := pemBlock(b); err != nil {
		return nil, err
	}
	if err := checkUTF8(b); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, errEmpty
	} else if err != nil {
		return nil, syntaxError(b, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document; put everything in one")
	}
	w := newWalker()
	if !w.document(&doc) {
		return nil, w.err()
	}
	var c Config
	if err := doc.Decode(&c); err != nil {
		// The walker removed what does not decode; this is a bug.
		return nil, friendly(err)
	}
	c.lines = w.lines // check says where a key is wrong
	w.checked(c.check())
	if err := w.err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// checkUTF8 reports the first byte of b that is not UTF-8, at its line
// and column (in bytes): yaml.v3 says only "invalid leading UTF-8 octet",
// at the line where the construct around it starts.
func checkUTF8(b []byte) error {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			line := 1 + bytes.Count(b[:i], []byte("\n"))
			col := i - bytes.LastIndexByte(b[:i], '\n')
			return problem{line, fmt.Sprintf("byte 0x%02x at column %d is not UTF-8: save the file as UTF-8 (a configuration is text; an editor that wrote Latin-1 or UTF-16 may have done this)", b[i], col)}
		}
		i += n
	}
	return nil
}

func friendly(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		if s := unknownKey.FindStringSubmatch(m); s != nil {
			m = fmt.Sprintf("line %s: unknown key %q", s[1], s[2])
		} else if s := duplicateKy.FindStringSubmatch(m); s != nil {
			m = fmt.Sprintf("line %s: key %q is already set at line %s", s[1], s[2], s[3])
		}
		msgs = append(msgs, m)
	}
	return errors.New(strings.Join(msgs, "; "))
}
