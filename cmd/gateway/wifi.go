package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/fencegate/fencegate/wifi"
)

func cmdWiFi(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("wifi", "--from wifi.txt [--out FILE]", `
Checks a wifi.txt, the Wi-Fi settings of the image's card (docs/site.md),
and with --out writes wpa_supplicant's configuration for that network to
FILE: whole, mode 0600, through a temporary file renamed over the old one.
For WPA2-Personal it holds the key derived from the passphrase, not the
passphrase. For WPA2-Enterprise the CA file that ca: names is read from
beside wifi.txt and written beside FILE, as FILE without .conf plus
-ca.pem. Prints one line: the network's name, country and security, never
a key or password. Nothing is written if wifi.txt or its CA file is not
valid (exit 78); the errors name the line (the first 10, then how many
more). A wifi.txt whose one line is "off" turns Wi-Fi off: it prints
"FROM: off: Wi-Fi off", and with --out removes FILE and its CA file.`)
	from := fs.String("from", "", "the wifi.txt to read (required)")
	out := fs.String("out", "", "where to write wpa_supplicant's configuration (without it: check only)")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	if *from == "" {
		return fs.hinted(usageErr("--from is required: the wifi.txt to check"))
	}
	n, err := wifi.ReadFile(*from)
	if err != nil {
		return configErr(err)
	}
	if n.Off {
		return wifiOff(*from, *out, stdout)
	}
	ca, err := n.LoadCA(filepath.Dir(*from))
	if err != nil {
		return configErr(err)
	}
	if *out == "" {
		fmt.Fprintf(stdout, "%s: ok: %s\n", *from, n.Summary())
		return nil
	}
	if err := n.Write(*out, ca); err != nil {
		return fmt.Errorf("--out %s: %w", *out, err)
	}
	fmt.Fprintf(stdout, "%s: ok: %s; wrote %s\n", *from, n.Summary(), *out)
	return nil
}

// wifiOff says that the file turns Wi-Fi off and, with out, removes the
// configuration there and its CA file:
//
//	FROM: off: Wi-Fi off
//	FROM: off: Wi-Fi off; removed OUT[ and OUT's CA file]
//	FROM: off: Wi-Fi off; no OUT to remove
func wifiOff(from, out string, stdout io.Writer) error {
	if out == "" {
		fmt.Fprintf(stdout, "%s: off: Wi-Fi off\n", from)
		return nil
	}
	removed, err := wifi.Remove(out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	if len(removed) == 0 {
		fmt.Fprintf(stdout, "%s: off: Wi-Fi off; no %s to remove\n", from, out)
		return nil
	}
	fmt.Fprintf(stdout, "%s: off: Wi-Fi off; removed %s\n", from, strings.Join(removed, " and "))
	return nil
}
