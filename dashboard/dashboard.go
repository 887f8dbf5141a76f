// Package dashboard is the gateway's web dashboard: plain HTML, CSS and
// JavaScript embedded in the binary, with no build step. It reads the JSON
// API and the event stream of package httpapi and, when it runs in the
// simulator, the simulator's own endpoints (/api/sim).
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the dashboard's files.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
