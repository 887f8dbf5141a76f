package main

import (
	"github.com/fencegate/fencegate/config"
)

// loadForCheck loads the configuration for gateway check: with
// --config-only (on another machine, say) without reading the files it
// names.
func loadForCheck(path string, only bool) (*config.Config, error) {
	if !only || path == "" {
		return loadConfig(path)
	}
	cfg, err := config.LoadWithoutFiles(path)
	if err != nil {
		return nil, configErr(err)
	}
	return cfg, nil
}

// namedFiles lists the files cfg names besides the store, as "KEY PATH".
func namedFiles(cfg *config.Config) []string {
	m := cfg.MQTT
	var files []string
	if m.PasswordFile != "" {
		files = append(files, "mqtt.password_file "+m.PasswordFile)
	}
	if t := m.TLS; t != nil {
		for _, f := range [][2]string{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}} {
			if f[1] != "" {
				files = append(files, "mqtt.tls."+f[0]+" "+f[1])
			}
		}
	}
	return files
}
