package docs_test

import (
	"fmt"
	"strings"
	"testing"
)

// summary writes a doc's steps compactly, for comparison.
func summary(d *doc) string {
	var b strings.Builder
	kinds := map[stepKind]string{stepRun: "run", stepBackground: "background", stepStop: "stop", stepSkip: "skip"}
	for _, st := range d.steps {
		fmt.Fprintf(&b, "%s@%d", kinds[st.kind], st.pos.line)
		if st.hidden {
			b.WriteString(" hidden")
		}
		if st.reason != "" {
			fmt.Fprintf(&b, " reason=%q", st.reason)
		}
		if st.wait != (wait{}) {
			fmt.Fprintf(&b, " wait=%s", st.wait)
		}
		if st.kind == stepStop {
			fmt.Fprintf(&b, " match=%q", st.match)
		}
		b.WriteString("\n")
		if st.kind == stepSkip {
			continue
		}
		for _, c := range st.cmds {
			fmt.Fprintf(&b, "  cmd@%d %q\n", c.pos.line, c.text)
			for _, e := range c.expect {
				fmt.Fprintf(&b, "    want@%d %q\n", e.pos.line, e.text)
			}
		}
		for _, e := range st.expect {
			fmt.Fprintf(&b, "  block want@%d %q\n", e.pos.line, e.text)
		}
	}
	return b.String()
}

func TestParseDoc(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"output comments right below a command",
			"```sh\nmake sim     # a reader's note\n# out 1\n# out 2\n\n# a reader's note\necho hi\n#\n```\n",
			"run@1\n  cmd@2 \"make sim     # a reader's note\"\n    want@3 \"out 1\"\n    want@4 \"out 2\"\n  cmd@7 \"echo hi\"\n    want@8 \"\"\n"},
		{"a command over several lines",
			"```sh\nmosquitto_pub -t x \\\n  -m '{\"a\":1}'\n# x\nsh -c '\n  echo a\n  echo b'\ncat > f <<'EOF'\n# not output\nEOF\nfalse ||\n  true\n```\n",
			"run@1\n  cmd@2 \"mosquitto_pub -t x \\\\\\n  -m '{\\\"a\\\":1}'\"\n    want@4 \"x\"\n  cmd@5 \"sh -c '\\n  echo a\\n  echo b'\"\n  cmd@8 \"cat > f <<'EOF'\\n# not output\\nEOF\"\n  cmd@11 \"false ||\\n  true\"\n"},
		{"a text block right below is the block's output",
			"```sh\necho a\n```\n\n```text\na\n\n(exit 0)\n```\n",
			"run@1\n  cmd@2 \"echo a\"\n  block want@6 \"a\"\n  block want@8 \"(exit 0)\"\n"},
		{"prose between: not output",
			"```sh\necho a\n```\n\nSome prose.\n\n```text\na\n```\n",
			"run@1\n  cmd@2 \"echo a\"\n"},
		{"not output",
			"```sh\necho a\n```\n<!-- doctest: not output -->\n```text\na\n```\n",
			"run@1\n  cmd@2 \"echo a\"\n"},
		{"output after prose",
			"```sh\necho a\n```\n\nIt prints:\n\n<!-- doctest: output -->\n\n```text\na\n```\n",
			"run@1\n  cmd@2 \"echo a\"\n  block want@10 \"a\"\n"},
		{"skip",
			"<!-- doctest: skip needs a Raspberry Pi -->\n```sh\nsudo reboot\n```\n```text\nbye\n```\n",
			"skip@2 reason=\"needs a Raspberry Pi\"\n"},
		{"background block: one terminal for the whole block",
			"<!-- doctest: background wait-output=\"simulator ready\" -->\n```sh\nmake build\nbin/gateway sim\n# ready\n```\n",
			"background@2 wait=a line containing \"simulator ready\"\n  cmd@3 \"make build\\nbin/gateway sim\"\n    want@5 \"ready\"\n"},
		{"hidden commands and stop",
			"<!-- doctest: run background wait-http=http://127.0.0.1:2379/health etcd --data-dir /tmp/e -->\n<!-- doctest: run rm -f x -->\ntext\n<!--\n  doctest: stop make sim\n-->\n<!-- an ordinary comment -->\n",
			"background@1 hidden wait=an answer from http://127.0.0.1:2379/health\n  cmd@1 \"etcd --data-dir /tmp/e\"\nrun@2 hidden\n  cmd@2 \"rm -f x\"\nstop@4 hidden match=\"make sim\"\n"},
		{"indented fence in a list item",
			"- item\n\n  ```sh\n  echo a\n  # a\n  ```\n",
			"run@3\n  cmd@4 \"echo a\"\n    want@5 \"a\"\n"},
		{"other languages are not run",
			"```yaml\nid: x\n```\n```json\n{}\n```\n```console\n$ rm -rf /\n```\n",
			""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := parseDoc("doc.md", tt.md)
			if err != nil {
				t.Fatalf("parseDoc: %v", err)
			}
			if got := summary(d); got != tt.want {
				t.Errorf("parseDoc(%q):\ngot:\n%s\nwant:\n%s", tt.md, got, tt.want)
			}
		})
	}
}

func TestParseDocErrors(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"no language", "text\n\n```\nls\n```\n", "doc.md:3: code block without a language"},
		{"not closed", "```sh\nls\n", "doc.md:1: code block without its closing ```"},
		{"directive not before a block", "<!-- doctest: skip because -->\nprose\n```sh\nls\n```\n", "doc.md:1: directive \"skip\" is not directly before a code block"},
		{"directive at the end", "text\n<!-- doctest: skip because -->\n", "doc.md:2: directive \"skip\" is not directly before a code block"},
		{"skip without a reason", "<!-- doctest: skip -->\n```sh\nls\n```\n", "doc.md:1: doctest: skip needs a reason"},
		{"unknown directive", "<!-- doctest: sometimes -->\n```sh\nls\n```\n", "doc.md:1: unknown directive \"sometimes\""},
		{"background with junk", "<!-- doctest: background wait=1 -->\n```sh\nls\n```\n", "doc.md:1: doctest: background: unexpected \"wait=1\""},
		{"run without a command", "<!-- doctest: run background wait-output=\"x\" -->\n", "doc.md:1: doctest: run needs a command"},
		{"skip before text", "<!-- doctest: skip x -->\n```text\nls\n```\n", "doc.md:1: directive \"skip\" does not apply to a text block"},
		{"output without sh", "<!-- doctest: output -->\n```text\nls\n```\n", "doc.md:1: directive \"output\": no runnable sh block before it"},
		{"open quote", "```sh\necho 'a\n```\n", "doc.md:2: command does not end (a ' is not closed)"},
		{"heredoc without end", "```sh\ncat <<EOF\na\n```\n", "doc.md:2: command does not end (here-document without its EOF line)"},
		{"exit not last", "```sh\nfalse\n# (exit 1)\n# more\n```\n", "doc.md:3: (exit N) must be the last expected line"},
		{"comment not closed", "<!-- doctest: skip x\n```sh\nls\n```\n", "doc.md:1: HTML comment without its closing -->"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseDoc("doc.md", tt.md)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseDoc(%q) = %v, want an error containing %q", tt.md, err, tt.want)
			}
		})
	}
}
