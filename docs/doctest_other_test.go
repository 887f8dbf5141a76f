//go:build !linux

package docs_test

import "testing"

func TestDocs(t *testing.T) {
	t.Skip("the docs' examples run in Linux namespaces")
}
