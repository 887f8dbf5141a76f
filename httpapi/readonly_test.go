package httpapi_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// routes returns the patterns this package registers: the first argument
// of every Handle and HandleFunc call in its non-test files, read from the
// source, so that a route added later is walked without anyone adding it
// here.
func routes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var pats []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") || len(call.Args) == 0 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: a route whose pattern is not a string literal; this test cannot walk it", fset.Position(call.Pos()))
				return true
			}
			p, _ := strconv.Unquote(lit.Value)
			pats = append(pats, p)
			return true
		})
	}
	if len(pats) < 5 {
		t.Fatalf("found %d routes in the package's source (%q), want the dashboard and the four API routes at least", len(pats), pats)
	}
	return pats
}

var wildcard = regexp.MustCompile(`\{[^}]*\}`)

// TestNoStateChangingEndpoint: the gateway's HTTP API
// changes nothing. Every route the package registers is GET only, and
// every path, the registered ones, the dashboard's files, the simulator's
// POST routes and unknown ones, answers POST, PUT, PATCH and DELETE with
// 405 and Allow: GET, HEAD.
func TestNoStateChangingEndpoint(t *testing.T) {
	srv, _ := newServer(t)
	paths := []string{"/api/sim/crash", "/api/sim/scenarios/paused-controller", "/api/actuators/pump", "/api/nothing", "/nothing"}
	for _, p := range routes(t) {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = "", p
		}
		if method != http.MethodGet {
			t.Errorf("route %q answers more than GET: the gateway's API must not change state (commands go over MQTT, where they are fenced)", p)
		}
		paths = append(paths, wildcard.ReplaceAllString(path, "x"))
	}
	static, err := os.ReadDir("../dashboard/static")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range static {
		paths = append(paths, "/"+e.Name())
	}
	for _, path := range paths {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			code, allow := call(t, srv.URL, method, path)
			if code != http.StatusMethodNotAllowed || !sameMethods(allow, "GET", "HEAD") {
				t.Errorf("%s %s = %d, Allow %q; want 405, Allow: GET, HEAD", method, path, code, allow)
			}
		}
	}
	// The routes themselves answer GET: the walk reached them.
	for _, path := range []string{"/", "/api/status", "/api/actuators", "/api/audit", "/api/events"} {
		if code, _ := call(t, srv.URL, http.MethodGet, path); code != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, code)
		}
	}
}

// call sends a request without a body and returns the status code and the
// Allow header; it reads no more than the headers (GET /api/events
// streams).
func call(t *testing.T, base, method, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Allow")
}

func sameMethods(allow string, want ...string) bool {
	var got []string
	for _, m := range strings.Split(allow, ",") {
		got = append(got, strings.TrimSpace(m))
	}
	slices.Sort(got)
	return slices.Equal(got, want)
}
