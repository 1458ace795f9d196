package bulkhead

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// A Request is what the layers see of a call: the method and path that route
// patterns match, and the *http.Request when there is one.
type Request struct {
	Method string        // "GET", "POST", …; or a job kind outside HTTP
	Path   string        // the URL path; or a task name outside HTTP
	HTTP   *http.Request // nil outside HTTP
}

// route is a compiled Layer.Route, an http.ServeMux pattern
// "[METHOD ][HOST]/[PATH]", in the representation ServeMux's routing tree
// gives it: it is matched exactly as a ServeMux with only this pattern
// registered would route a request to it.
type route struct {
	str    string // as written: what http.Request.Pattern holds
	method string
	host   string
	segs   []routeSeg
}

// A routeSeg is one segment of a route's path, as in net/http's pattern.go.
type routeSeg struct {
	// s is the literal, unescaped; "/" for a final {$}. A literal that
	// unescapes to "/" ("%2F") is the same node of ServeMux's tree as {$}.
	s string
	// wild is set for {name}, and for an empty literal ("/a//b"), which
	// ServeMux's tree stores in the same child as a wildcard: either matches
	// any one segment except one that is "/" (a final slash, or "%2F").
	wild bool
	// multi is set for {name...} and for a trailing slash.
	multi bool
}

// parseRoute compiles pattern for layer name. A pattern http.ServeMux would
// reject panics, with ServeMux's reason: the pattern is registered in a real
// ServeMux first, so what it accepts and refuses is ServeMux's own decision.
// (Under GODEBUG=httpmuxgo121=1 ServeMux keeps Go 1.21's rules; Route keeps
// the current ones, and a pattern without a '/' still panics.)
func parseRoute(name, pattern string) *route {
	func() {
		defer func() {
			if r := recover(); r != nil {
				panic(fmt.Sprintf("bulkhead: layer %s: Route: %v", name, r))
			}
		}()
		http.NewServeMux().Handle(pattern, http.NotFoundHandler())
	}()
	// ServeMux accepted it; so does checkRoute, which holds the same rules
	// for when ServeMux is Go 1.21's (GODEBUG=httpmuxgo121=1) and accepts
	// anything. Then split it as net/http's parsePattern does.
	if err := checkRoute(pattern); err != "" {
		panic("bulkhead: layer " + name + ": Route " + strconv.Quote(pattern) + ": " + err)
	}
	rt := &route{str: pattern}
	rest := pattern
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		rt.method, rest = pattern[:i], strings.TrimLeft(pattern[i+1:], " \t")
	}
	i := strings.IndexByte(rest, '/')
	rt.host, rest = rest[:i], rest[i:]
	for len(rest) > 0 {
		if rest == "/" {
			rt.segs = append(rt.segs, routeSeg{wild: true, multi: true})
			break
		}
		var seg string
		seg, rest = patternSeg(rest)
		switch {
		case seg == "{$}":
			rt.segs = append(rt.segs, routeSeg{s: "/"})
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "...}"):
			rt.segs = append(rt.segs, routeSeg{wild: true, multi: true})
		case strings.HasPrefix(seg, "{"):
			rt.segs = append(rt.segs, routeSeg{wild: true})
		default:
			s := unescapeSeg(seg)
			rt.segs = append(rt.segs, routeSeg{s: s, wild: s == ""})
		}
	}
	return rt
}

// checkRoute returns why net/http's parsePattern (Go 1.22 and later) rejects
// pattern, or "".
func checkRoute(pattern string) string {
	if pattern == "" {
		return "empty pattern"
	}
	method, rest, found := pattern, "", false
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		method, rest, found = pattern[:i], strings.TrimLeft(pattern[i+1:], " \t"), true
	}
	if !found {
		method, rest = "", pattern
	}
	for i := 0; i < len(method); i++ {
		if c := method[i]; !(c < 0x80 && (isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0)) {
			return "invalid method " + strconv.Quote(method)
		}
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return "host/path missing /"
	}
	if strings.IndexByte(rest[:i], '{') >= 0 {
		return "host contains '{' (missing initial '/'?)"
	}
	rest = rest[i:]
	if method != "" && method != "CONNECT" && !isClean(rest) {
		return "non-CONNECT pattern with unclean path can never match"
	}
	var names []string
	for len(rest) > 0 {
		if rest == "/" {
			break // a trailing slash
		}
		var seg string
		seg, rest = patternSeg(rest)
		k := strings.IndexByte(seg, '{')
		if k < 0 {
			continue
		}
		switch {
		case k != 0:
			return "bad wildcard segment (must start with '{')"
		case seg[len(seg)-1] != '}':
			return "bad wildcard segment (must end with '}')"
		}
		name := seg[1 : len(seg)-1]
		if name == "$" {
			if rest != "" {
				return "{$} not at end"
			}
			break
		}
		name, multi := strings.CutSuffix(name, "...")
		switch {
		case multi && rest != "":
			return "{...} wildcard not at end"
		case name == "":
			return "empty wildcard"
		case !isIdent(name):
			return "bad wildcard name " + strconv.Quote(name)
		case slices.Contains(names, name):
			return "duplicate wildcard name " + strconv.Quote(name)
		}
		names = append(names, name)
	}
	return ""
}

// patternSeg splits the pattern path p, which starts with '/' and is not "/",
// into its first segment and the rest.
func patternSeg(p string) (seg, rest string) {
	p = p[1:]
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// isIdent reports whether s is a Go identifier, as a wildcard name must be.
func isIdent(s string) bool {
	for i, c := range s {
		if !unicode.IsLetter(c) && c != '_' && (i == 0 || !unicode.IsDigit(c)) {
			return false
		}
	}
	return s != ""
}

// target is what routing reads of one request, computed once per request.
type target struct {
	method  string
	host    string // r.Host
	urlHost string // r.URL.Host
	path    string // the escaped path, as ServeMux matches it
	escaped bool   // path has %-escapes to decode (never for Do's Request.Path)
	clean   bool   // ServeMux's cleanPath leaves path as it is
}

// targetOf returns what ServeMux would route req by: the *http.Request's
// method, Host and escaped path when there is one; else Method and Path, as
// the decoded URL.Path of a request without a host.
func targetOf(req *Request) target {
	if r := req.HTTP; r != nil {
		t := target{method: r.Method, host: r.Host}
		if r.URL != nil {
			t.urlHost, t.path = r.URL.Host, r.URL.EscapedPath()
		}
		t.escaped = strings.IndexByte(t.path, '%') >= 0
		t.clean = isClean(t.path)
		return t
	}
	return target{method: req.Method, path: req.Path, clean: isClean(req.Path)}
}

// routes reports whether a ServeMux with only rt registered would dispatch
// t to rt's handler: not a redirect (an unclean path, or a missing trailing
// slash), not a 404 or a 405. It follows ServeMux.findHandler step by step,
// without allocating.
func (rt *route) routes(t *target) bool {
	if rt.method != "" && rt.method != t.method && (rt.method != "GET" || t.method != "HEAD") {
		return false
	}
	if t.method == "CONNECT" {
		// Not cleaned; the trailing-slash redirect is decided on URL.Host,
		// the match on Host, port included.
		if rt.matchHost(t.urlHost) && rt.redirects(t.path, t.escaped) {
			return false
		}
		return rt.matchHost(t.host) && rt.match(t.path, t.escaped, false)
	}
	if !t.clean {
		return false // redirected to the cleaned path
	}
	if rt.host != "" && rt.host != stripHostPort(t.host) {
		return false // a host pattern can neither match nor redirect
	}
	return !rt.redirects(t.path, t.escaped) && rt.match(t.path, t.escaped, false)
}

func (rt *route) matchHost(host string) bool { return rt.host == "" || rt.host == host }

// redirects reports whether ServeMux's trailing-slash redirect applies to
// path, method and host having matched: path does not match rt exactly, and
// path+"/" does.
func (rt *route) redirects(path string, escaped bool) bool {
	if path == "" || path[len(path)-1] == '/' {
		return false
	}
	if !rt.segs[len(rt.segs)-1].multi {
		// Every match is exact: path+"/" could match only through a final
		// {$}, which then does not match path.
		return rt.segs[len(rt.segs)-1].s == "/" && rt.match(path, escaped, true)
	}
	if rt.match(path, escaped, false) && rt.exact(path, 0) {
		return false
	}
	return rt.match(path, escaped, true) && rt.exact(path, 1)
}

// exact is net/http's exactMatch for a path that matched rt, extra being the
// number of slashes appended to path: a match is inexact when a final
// {name...} or trailing slash matched a non-empty rest.
func (rt *route) exact(path string, extra int) bool {
	if !rt.segs[len(rt.segs)-1].multi {
		return true
	}
	if extra == 0 && len(path) > 0 && path[len(path)-1] != '/' {
		return false
	}
	return len(rt.segs) == strings.Count(path, "/")+extra
}

// match is ServeMux's path match (routingNode.matchPath) for a tree holding
// rt alone, on path, or on path+"/" if slash; method and host are checked by
// the caller.
func (rt *route) match(path string, escaped, slash bool) bool {
	for i := 0; ; i++ {
		if path == "" && slash {
			path, slash = "/", false
		}
		if path == "" {
			return i == len(rt.segs) // only the last node has the pattern
		}
		if i == len(rt.segs) {
			return false
		}
		sg := &rt.segs[i]
		if sg.multi {
			return true // matches any non-empty rest
		}
		// firstSegment: "/" alone is the segment "/"; else up to the next
		// slash, unescaped.
		if path == "/" {
			if sg.wild || sg.s != "/" {
				return false
			}
			path = ""
			continue
		}
		seg := path[1:]
		path = ""
		if j := strings.IndexByte(seg, '/'); j >= 0 {
			seg, path = seg[:j], seg[j:]
		}
		switch {
		case sg.wild:
			if escaped && len(seg) == 3 && segEqual(seg, "/") {
				return false // "%2F" is the segment "/"
			}
		case escaped:
			if !segEqual(seg, sg.s) {
				return false
			}
		default:
			if seg != sg.s {
				return false
			}
		}
	}
}

// segEqual reports whether the escaped path segment e unescapes to s, as
// net/http's pathUnescape does it (an invalid escape leaves e as it is),
// without allocating.
func segEqual(e, s string) bool {
	if strings.IndexByte(e, '%') < 0 || !validEscapes(e) {
		return e == s
	}
	j := 0
	for i := 0; i < len(e); i++ {
		c := e[i]
		if c == '%' {
			c = unhex(e[i+1])<<4 | unhex(e[i+2])
			i += 2
		}
		if j >= len(s) || s[j] != c {
			return false
		}
		j++
	}
	return j == len(s)
}

// unescapeSeg is net/http's pathUnescape, for patterns (in New).
func unescapeSeg(e string) string {
	if !validEscapes(e) {
		return e
	}
	var b strings.Builder
	for i := 0; i < len(e); i++ {
		c := e[i]
		if c == '%' {
			c = unhex(e[i+1])<<4 | unhex(e[i+2])
			i += 2
		}
		b.WriteByte(c)
	}
	return b.String()
}

// validEscapes reports whether every '%' in e starts a two-digit hex escape,
// the only error url.PathUnescape reports.
func validEscapes(e string) bool {
	for i := 0; i < len(e); i++ {
		if e[i] == '%' {
			if i+2 >= len(e) || !ishex(e[i+1]) || !ishex(e[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// isClean reports whether net/http's cleanPath leaves p unchanged: rooted,
// and no empty, "." or ".." segment except a final empty one (a trailing
// slash).
func isClean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for rest := p[1:]; ; {
		seg, next, more := rest, "", false
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			seg, next, more = rest[:j], rest[j+1:], true
		}
		if seg == "." || seg == ".." || seg == "" && more {
			return false
		}
		if !more {
			return true
		}
		rest = next
	}
}

// stripHostPort is net/http's: h without any trailing ":<port>".
func stripHostPort(h string) string {
	if !strings.Contains(h, ":") {
		return h
	}
	host, _, err := net.SplitHostPort(h)
	if err != nil {
		return h
	}
	return host
}

// applies reports whether the layer of rt applies to t: rt is pattern, the
// ServeMux's choice, when there is one (Config.RouteByPattern); else rt
// routes t.
func (rt *route) applies(t *target, pattern string) bool {
	if pattern != "" {
		return pattern == rt.str
	}
	return rt.routes(t)
}
