package bulkhead

import (
	"net/http"
	"strings"
)

// A Request is what the layers see of a call: the method and path that route
// patterns match, and the *http.Request when there is one.
type Request struct {
	Method string        // "GET", "POST", …; or a job kind outside HTTP
	Path   string        // the URL path; or a task name outside HTTP
	HTTP   *http.Request // nil outside HTTP
}

// route is a compiled Layer.Route: "[METHOD ]/path" with ServeMux-style
// wildcards.
type route struct {
	method  string
	segs    []string // literal segments, or "" for a {name} wildcard
	rest    bool     // last pattern segment was {name...}: matches the rest
	subtree bool     // pattern ended in "/": matches the rest
}

// parseRoute compiles a pattern such as "POST /reports/export-pdf",
// "GET /items/{id}", "/static/" or "/files/{path...}".
func parseRoute(layer, pattern string) *route {
	r := &route{}
	p := pattern
	if i := strings.IndexByte(p, ' '); i >= 0 {
		r.method, p = p[:i], strings.TrimLeft(p[i+1:], " ")
	}
	if !strings.HasPrefix(p, "/") {
		panic("bulkhead: layer " + layer + ": route " + pattern + ": path must start with /")
	}
	if strings.HasSuffix(p, "/") && len(p) > 1 {
		r.subtree = true
		p = p[:len(p)-1]
	} else if p == "/" {
		r.subtree = true
		p = ""
	}
	if p == "" {
		return r
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			if strings.HasSuffix(s, "...}") {
				if i != len(parts)-1 {
					panic("bulkhead: layer " + layer + ": route " + pattern + ": {name...} must be last")
				}
				r.rest = true
				break
			}
			s = ""
		} else if strings.ContainsAny(s, "{}") {
			panic("bulkhead: layer " + layer + ": route " + pattern + ": a wildcard must be a whole segment")
		}
		r.segs = append(r.segs, s)
	}
	return r
}

// match reports whether method and path match r, without allocating. A "GET"
// pattern also matches HEAD, as in http.ServeMux.
func (r *route) match(method, path string) bool {
	if r.method != "" && r.method != method && (r.method != "GET" || method != "HEAD") {
		return false
	}
	if path == "" || path[0] != '/' {
		return false
	}
	rest := path[1:]
	for i, s := range r.segs {
		seg, next, more := rest, "", false
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			seg, next, more = rest[:j], rest[j+1:], true
		}
		if s == "" && seg == "" || s != "" && s != seg {
			return false
		}
		last := i == len(r.segs)-1
		if !last && !more {
			return false // path too short
		}
		if last && more && !r.rest && !r.subtree {
			return false // "/items" matches neither "/items/" nor "/items/x"
		}
		rest = next
	}
	return len(r.segs) > 0 || r.subtree || rest == ""
}
