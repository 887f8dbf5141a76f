package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fencegate/fencegate/mqttsec"
)

// flagSet is a subcommand's flags and its usage text. -h, -help and
// --help print the usage on stdout and end the command (errHelp) before it
// does anything; hidden flags (for the simulator and tests) work but are
// not listed.
type flagSet struct {
	*flag.FlagSet
	name, synopsis, about string
	hidden                map[string]bool
	// hintOnError: a bad flag prints what is wrong and a one-line hint
	// to -h, not the whole usage, which would bury the error.
	hintOnError bool
}

// newFlags returns the flags of "gateway NAME SYNOPSIS"; about describes
// the command.
func newFlags(name, synopsis, about string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("gateway "+name, flag.ContinueOnError), name: name, synopsis: synopsis, about: about,
		hidden: map[string]bool{}}
	fs.Usage = func() {} // parse prints the usage itself, on the right stream
	return fs
}

// hide keeps a flag out of the usage.
func (fs *flagSet) hide(name string) { fs.hidden[name] = true }

// usage prints the command's usage to w.
func (fs *flagSet) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage:\n  gateway %s %s\n", fs.name, fs.synopsis)
	if fs.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(fs.about))
	}
	var any bool
	fs.VisitAll(func(f *flag.Flag) { any = any || !fs.hidden[f.Name] })
	if !any {
		return
	}
	fmt.Fprintf(w, "\nFlags:\n")
	out := fs.Output()
	fs.SetOutput(w)
	defer fs.SetOutput(out)
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if !fs.hidden[f.Name] {
			shown.Var(f.Value, f.Name, f.Usage)
		}
	})
	shown.PrintDefaults()
}

// parse parses args. With -h it prints the usage to stdout and returns
// errHelp; a bad flag is a usage error, with the usage on stderr.
func (fs *flagSet) parse(args []string, stdout, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.usage(stdout)
			return errHelp
		}
		if fs.hintOnError {
			fmt.Fprintln(stderr, fs.hint())
		} else {
			fs.usage(stderr)
		}
		return &exitError{exitUsage, nil} // the flag package printed what was wrong
	}
	return nil
}

// parseNoArgs is parse for commands that take flags only.
func (fs *flagSet) parseNoArgs(args []string, stdout, stderr io.Writer) error {
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q (see gateway %s -h)", fs.Arg(0), fs.name)
	}
	return nil
}

// parseInterspersed parses flags and positional arguments in any order
// and returns the positional ones.
func (fs *flagSet) parseInterspersed(args []string, stdout, stderr io.Writer) ([]string, error) {
	var pos []string
	for {
		if err := fs.parse(args, stdout, stderr); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// hint is the line that sends a user who got the command wrong to its
// usage.
func (fs *flagSet) hint() string { return "Run gateway " + fs.name + " -h for the usage." }

// hinted is err, a usage error that says what is wrong, with the hint to
// the command's usage on a line of its own below; other errors, a bad
// flag, which parse has answered with the hint already, and an error that
// has the hint, as they are.
func (fs *flagSet) hinted(err error) error {
	if ee, ok := err.(*exitError); ok && ee.code == exitUsage && ee.err != nil && !strings.HasSuffix(ee.err.Error(), "\n"+fs.hint()) {
		return &exitError{exitUsage, fmt.Errorf("%w\n%s", ee.err, fs.hint())}
	}
	return err
}

// broker checks the URL a --broker flag gave by the rule of the
// configuration's mqtt.broker (mqttsec.BrokerURL, one rule for both) and
// returns it with its scheme's port if it named none; a bad URL is a
// usage error that says what to write, with the hint to the usage.
func (fs *flagSet) broker(url string) (string, error) {
	u, err := mqttsec.BrokerURL(url)
	if err != nil {
		return "", fs.hinted(usageErr("--broker %q: %v", mqttsec.Redacted(url), err))
	}
	return u, nil
}

// uintFlag is a whole-number flag from lo to hi. A value that is not one
// is refused with the range (the flag package's own would say "parse
// error").
type uintFlag struct{ n, lo, hi uint64 }

// uintRange defines a uintFlag, 0 unless given.
func (fs *flagSet) uintRange(name string, lo, hi uint64, usage string) *uint64 {
	f := &uintFlag{lo: lo, hi: hi}
	fs.Var(f, name, usage)
	return &f.n
}

func (f *uintFlag) String() string {
	if f == nil {
		return "0"
	}
	return strconv.FormatUint(f.n, 10)
}

func (f *uintFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n < f.lo || n > f.hi {
		top := strconv.FormatUint(f.hi, 10)
		if f.hi == 1<<63-1 {
			top = "2^63-1"
		}
		return fmt.Errorf("want a whole number from %d to %s", f.lo, top)
	}
	f.n = n
	return nil
}
