package packaging

import (
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// nfpmConfig is what the tests read of packaging/nfpm.yaml.
type nfpmConfig struct {
	License  string `yaml:"license"`
	Contents []struct {
		Src  string `yaml:"src"`
		Dst  string `yaml:"dst"`
		Type string `yaml:"type"`
	} `yaml:"contents"`
}

// readNfpm reads packaging/nfpm.yaml.
func readNfpm(t *testing.T) nfpmConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "packaging", "nfpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c nfpmConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("packaging/nfpm.yaml: %v", err)
	}
	return c
}
