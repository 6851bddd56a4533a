package control

import (
	"embed"
	"io/fs"
	"net/http"
)

// The console is plain HTML, CSS and JavaScript written for it, embedded
// in the binary: nothing is built at run time and nothing comes from
// elsewhere (the Content-Security-Policy says 'self').
//
//go:embed console
var consoleFiles embed.FS

//go:embed openapi.yaml
var openAPIFile []byte

func consoleHandler() http.Handler {
	sub, err := fs.Sub(consoleFiles, "console")
	if err != nil { // cannot be: the embed pattern above names the directory
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "the console is missing from this build: "+err.Error(), http.StatusInternalServerError)
		})
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(openAPIFile)
}
