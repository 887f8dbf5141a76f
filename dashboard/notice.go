package dashboard

import (
	_ "embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

// Notice is a page in the dashboard's style that says why the dashboard
// cannot be shown, and what to do about it.
type Notice struct {
	Title string // what is wrong, in a few words
	What  string // what happened
	// Fix says what the reader must do; empty when it recovers by itself.
	Fix string
	// Refresh, if not zero, makes the page reload itself that often.
	Refresh time.Duration
}

//go:embed notice.html
var noticeHTML string

var noticePage = template.Must(template.New("notice").Parse(noticeHTML))

// brand is the dashboard header's logo and name, cut from index.html so
// that the notice looks like the dashboard.
var brand = func() template.HTML {
	page, err := fs.ReadFile(static, "static/index.html")
	if err != nil {
		panic(err)
	}
	const start, end = `<div class="brand">`, `</div>`
	_, rest, ok := strings.Cut(string(page), start)
	inner, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		panic("dashboard: index.html has no " + start + " element")
	}
	return template.HTML(start + inner + end)
}()

// ServeNotice answers with n as an HTML page and the status code code. The
// page carries the dashboard's style sheet inline: whatever cannot serve
// the dashboard may not serve its files either.
func ServeNotice(w http.ResponseWriter, code int, n Notice) {
	style, err := fs.ReadFile(static, "static/style.css")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	noticePage.Execute(w, struct {
		Notice
		RefreshSeconds int
		Style          template.CSS
		Brand          template.HTML
	}{n, max(1, int(n.Refresh.Round(time.Second)/time.Second)), template.CSS(style), brand})
}
