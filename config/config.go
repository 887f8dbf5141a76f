// Package config reads and checks a gateway's YAML configuration.
//
// Loading is strict: unknown keys, duplicate keys, duplicate actuator names,
// pins used twice and missing required keys are errors that name the line
// and say what to change. Nothing is guessed.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fencegate/fencegate/boards"
)

// Boards this build can drive.
const (
	BoardSim         = "sim"
	BoardRaspberryPi = "raspberry-pi"
)

// DefaultHTTP is the JSON API address used when the http key is absent.
const DefaultHTTP = "127.0.0.1:8080"

// Config is a gateway's configuration.
type Config struct {
	// ID names the gateway in topics.
	ID   string `yaml:"id"`
	MQTT MQTT   `yaml:"mqtt"`
	// Store is the fence store's file. A relative path is relative to the
	// configuration file's directory.
	Store string `yaml:"store"`
	Board string `yaml:"board"`
	// HTTP is the JSON API's listen address; nil means DefaultHTTP and ""
	// disables it.
	HTTP      *string    `yaml:"http"`
	Actuators []Actuator `yaml:"actuators"`
}

// MQTT configures the broker connection.
type MQTT struct {
	Broker      string `yaml:"broker"`
	TopicPrefix string `yaml:"topic_prefix"`
	ClientID    string `yaml:"client_id"`
	Username    string `yaml:"username"`
	Password    string `yaml:"password"`
}

// Actuator configures one output.
type Actuator struct {
	Name      string `yaml:"name"`
	Pin       string `yaml:"pin"`
	ActiveLow bool   `yaml:"active_low"`
	Boot      string `yaml:"boot"`
	Scope     string `yaml:"scope"`

	line int
}

// HTTPAddr returns the JSON API address, "" if disabled.
func (c *Config) HTTPAddr() string {
	if c.HTTP == nil {
		return DefaultHTTP
	}
	return *c.HTTP
}

// Load reads and checks the configuration file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if !filepath.IsAbs(c.Store) {
		c.Store = filepath.Join(filepath.Dir(path), c.Store)
	}
	return c, nil
}

var (
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	unknownKey  = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	duplicateKy = regexp.MustCompile(`^line (\d+): mapping key "([^"]*)" already defined at line (\d+)$`)
)

// Parse checks a configuration document. Relative store paths are left as
// they are.
//
// Every problem is reported once, at the line to edit: the document is
// parsed into a node tree first, which a walker checks against Config
// (duplicate, unknown and misspelt keys, values of the wrong shape or
// type), and only what passes is decoded and checked.
func Parse(b []byte) (*Config, error) {
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
	lines := actuatorLines(&doc)
	for i := range c.Actuators {
		if i < len(lines) {
			c.Actuators[i].line = lines[i]
		}
	}
	w.checked(&c, c.check())
	if err := w.err(); err != nil {
		return nil, err
	}
	return &c, nil
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

func actuatorLines(root *yaml.Node) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "actuators" && m.Content[i+1].Kind == yaml.SequenceNode {
			var lines []int
			for _, n := range m.Content[i+1].Content {
				lines = append(lines, n.Line)
			}
			return lines
		}
	}
	return nil
}

func (c *Config) check() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	switch {
	case c.ID == "":
		bad("id is required (the gateway's name in topics, e.g. greenhouse-1)")
	case !nameRE.MatchString(c.ID):
		bad("id %q: use letters, digits, - and _ only", c.ID)
	}
	if c.MQTT.Broker == "" {
		bad("mqtt.broker is required (e.g. tcp://127.0.0.1:1883)")
	} else if err := checkBroker(c.MQTT.Broker); err != nil {
		bad("mqtt.broker %q: %v", c.MQTT.Broker, err)
	}
	if c.MQTT.TopicPrefix == "" {
		c.MQTT.TopicPrefix = "fencegate"
	} else if strings.ContainsAny(c.MQTT.TopicPrefix, "+#") || strings.HasPrefix(c.MQTT.TopicPrefix, "/") ||
		strings.HasSuffix(c.MQTT.TopicPrefix, "/") || strings.Contains(c.MQTT.TopicPrefix, "//") {
		bad("mqtt.topic_prefix %q: no wildcards (+ #), no leading, trailing or double /", c.MQTT.TopicPrefix)
	}
	if c.Store == "" {
		bad("store is required (the fence store's file, e.g. /var/lib/fencegate/fence.db)")
	}
	switch {
	case c.Board == BoardSim, boards.IsRaspberryPi(c.Board):
	case c.Board == "":
		bad("board is required (sim, or raspberry-pi to detect the model)")
	default:
		bad("board %q is unknown (want sim, %s)", c.Board, strings.Join(boards.BoardNames(), ", "))
	}
	if c.HTTP != nil && *c.HTTP != "" {
		_, port, err := net.SplitHostPort(*c.HTTP)
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		if err != nil {
			bad("http %q: want host:port, e.g. 127.0.0.1:8080, or \"\" to disable", *c.HTTP)
		}
	}
	if len(c.Actuators) == 0 {
		bad("actuators: at least one is required")
	}
	names := map[string]int{}
	pins := map[string]string{}
	for i := range c.Actuators {
		a := &c.Actuators[i]
		where := fmt.Sprintf("actuators[%d]", i)
		if a.line > 0 {
			where = fmt.Sprintf("line %d: actuator %q", a.line, a.Name)
		}
		switch {
		case a.Name == "":
			bad("%s: name is required", where)
		case !nameRE.MatchString(a.Name):
			bad("%s: name: use letters, digits, - and _ only (it is a topic level)", where)
		case names[a.Name] > 0:
			bad("%s: name is already used at line %d", where, names[a.Name])
		default:
			names[a.Name] = max(a.line, 1)
		}
		if a.Pin == "" {
			bad("%s: pin is required (e.g. GPIO17, BCM17 or PIN11)", where)
		} else if g, err := boards.Canonical(a.Pin); err != nil {
			bad("%s: %v", where, strings.TrimPrefix(err.Error(), "boards: "))
		} else if other, dup := pins[g]; dup {
			bad("%s: pin %s is %s, already used by %q", where, a.Pin, boards.Describe(g), other)
		} else {
			pins[g] = a.Name
			a.Pin = g
		}
		switch a.Boot {
		case "":
			a.Boot = "last"
		case "last", "off", "on":
		default:
			bad("%s: boot %q: want last, off or on", where, a.Boot)
		}
		if a.Scope == "" {
			a.Scope = a.Name
		} else if !nameRE.MatchString(a.Scope) {
			bad("%s: scope %q: use letters, digits, - and _ only", where, a.Scope)
		}
	}
	return errors.Join(errs...)
}

func checkBroker(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss":
	default:
		return fmt.Errorf("scheme %q: want tcp://host:port (or ssl, ws, wss)", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("no host; want e.g. tcp://127.0.0.1:1883")
	}
	if u.Port() == "" && u.Scheme != "ws" && u.Scheme != "wss" {
		return errors.New("no port; want e.g. tcp://127.0.0.1:1883")
	}
	return nil
}
