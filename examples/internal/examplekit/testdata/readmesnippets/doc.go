// Package readmesnippets is where TestREADMESnippetsCompile compiles the
// README's Go snippets (snippets.go exists only in the test's -overlay).
package readmesnippets
