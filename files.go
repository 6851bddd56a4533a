package streamrun

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/runtime"
)

// Files is a set of pipeline files read and checked together, as one run
// takes them. It opens nothing, so a reload reads the files again with
// the same checks and errors as a start.
type Files struct {
	// paths are the files read from disk, in order; inline are the ones
	// made in Go.
	paths  []string
	inline []pipelines.File

	conn      connSettings
	pipelines []pipelines.Pipeline
	// fileOf names the file each pipeline comes from, by name.
	fileOf    map[string]string
	telemetry pipelines.Telemetry
	control   pipelines.Control
}

// Load reads every file at paths (with pipelines.Load: errors read
// FILE:LINE:COL: field: what is wrong) and checks them together:
// pipeline names unique across the files, the same connection settings
// (service URL, TLS, auth, operation retries) in every file that sets
// them, and one telemetry section. lookupEnv supplies ${VAR}; nil means
// os.LookupEnv. Every problem of every file is in the error.
func Load(lookupEnv func(string) (string, bool), paths ...string) (*Files, error) {
	return load(paths, nil, lookupEnv)
}

func load(paths []string, inline []pipelines.File, lookupEnv func(string) (string, bool)) (*Files, error) {
	return loadWith(paths, inline, lookupEnv, nil)
}

// loadWith is load with the contents of some files given (by path) in
// place of what is on disk.
func loadWith(paths []string, inline []pipelines.File, lookupEnv func(string) (string, bool), contents map[string][]byte) (*Files, error) {
	fs := &Files{paths: paths, inline: inline, fileOf: map[string]string{}}
	var connFrom, telemetryFrom, controlFrom string
	var errs []error
	add := func(name string, f *pipelines.File) {
		for _, p := range f.Pipelines {
			if other, dup := fs.fileOf[p.Name]; dup {
				errs = append(errs, fmt.Errorf("%s: pipeline %q is also defined in %s: names must be unique across the files", name, p.Name, other))
				continue
			}
			fs.fileOf[p.Name] = name
			fs.pipelines = append(fs.pipelines, p)
		}
		if err := fs.addTelemetry(f.Telemetry, name, &telemetryFrom); err != nil {
			errs = append(errs, err)
		}
		if f.Control != (pipelines.Control{}) {
			if controlFrom == "" {
				fs.control, controlFrom = f.Control, name
			} else if f.Control != fs.control {
				errs = append(errs, fmt.Errorf("%s: control differs from %s: one run has one control section", name, controlFrom))
			}
		}
		conn := connSettings{f.ServiceURL, f.TLS, f.Auth, f.OperationRetries}
		if conn == (connSettings{}) {
			return // says nothing about the connection
		}
		if connFrom == "" {
			fs.conn, connFrom = conn, name
			return
		}
		if conn.ServiceURL != fs.conn.ServiceURL {
			errs = append(errs, fmt.Errorf("%s: service_url %q differs from %q in %s: one run talks to one cluster", name, conn.ServiceURL, fs.conn.ServiceURL, connFrom))
		} else if conn != fs.conn {
			errs = append(errs, fmt.Errorf("%s: tls, auth or operation_retries differ from %s: one run has one connection", name, connFrom))
		}
	}
	for _, path := range paths {
		var f *pipelines.File
		var err error
		if data, ok := contents[path]; ok {
			f, err = pipelines.LoadData(path, data, lookupEnv)
		} else {
			f, err = pipelines.Load(path, lookupEnv)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		add(path, f)
	}
	for i := range inline {
		name := inlineName(i)
		if err := inline[i].Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		add(name, &inline[i])
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return fs, nil
}

// inlineName is what messages call Options.Pipelines[i].
func inlineName(i int) string { return fmt.Sprintf("Options.Pipelines[%d]", i) }

// reread reads the same files again.
func (fs *Files) reread(lookupEnv func(string) (string, bool)) (*Files, error) {
	return load(fs.paths, fs.inline, lookupEnv)
}

// Pipelines are the pipelines of every file, in file order.
func (fs *Files) Pipelines() []pipelines.Pipeline { return fs.pipelines }

// Paths are the files read from disk, in order.
func (fs *Files) Paths() []string { return fs.paths }

// FileOf names the file pipeline comes from: its path, or
// "Options.Pipelines[i]" for one made in Go; "" for none.
func (fs *Files) FileOf(pipeline string) string { return fs.fileOf[pipeline] }

// Control is the files' control section (pipelines.Control); the zero
// value when none has one.
func (fs *Files) Control() pipelines.Control { return fs.control }

// names are the files, for messages.
func (fs *Files) names() []string {
	n := append([]string(nil), fs.paths...)
	for i := range fs.inline {
		n = append(n, inlineName(i))
	}
	return n
}

// settings are the files' settings outside their pipelines, as one
// file: each takes a restart to change (pipelines.ReloadRestart).
func (fs *Files) settings() *pipelines.File {
	c := fs.conn
	return &pipelines.File{ServiceURL: c.ServiceURL, TLS: c.TLS, Auth: c.Auth, OperationRetries: c.OperationRetries, Telemetry: fs.telemetry,
		Control: fs.control}
}

// connSettings are the parts of a file that say how to reach the
// cluster.
type connSettings struct {
	ServiceURL       string
	TLS              pipelines.TLS
	Auth             pipelines.Auth
	OperationRetries pipelines.OperationRetries
}

// ClientOptions are the client options the files ask for: their service
// URL ("" when they name none: the embedded broker), TLS, token and
// operation retries, and batching by key when a pipeline reads with a
// KeyShared subscription (see KeyShared).
func (fs *Files) ClientOptions() pool.Options {
	c := &fs.conn
	o := pool.Options{
		ServiceURL: c.ServiceURL,
		Token:      c.Auth.Token,
		TLS: pool.TLSOptions{
			CAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile,
			SkipHostnameVerification: c.TLS.SkipHostnameVerification, InsecureSkipVerify: c.TLS.Insecure,
		},
		OperationRetries: pool.OperationRetries{
			Attempts: c.OperationRetries.Attempts, Delay: c.OperationRetries.Delay, Timeout: c.OperationRetries.Timeout,
		},
	}
	if fs.KeyShared() {
		// The broker dispatches an entry whole, by its first key: outputs
		// (and input) for KeyShared pipelines must not mix keys in one.
		o.Producer.Batching.ByKey = true
	}
	return o
}

// KeyShared reports whether a pipeline reads with a KeyShared
// subscription; the run's producers then batch by key.
func (fs *Files) KeyShared() bool {
	for _, p := range fs.pipelines {
		if p.WithDefaults().Source.Type == pipelines.KeyShared {
			return true
		}
	}
	return false
}

// addTelemetry takes a file's telemetry section: the first file that has
// one gives it, and another that has a different one is an error (one
// run serves one set of endpoints).
func (fs *Files) addTelemetry(t pipelines.Telemetry, name string, from *string) error {
	if reflect.DeepEqual(t, pipelines.Telemetry{}) {
		return nil
	}
	if err := checkTelemetry(t, name); err != nil {
		return err
	}
	if *from == "" {
		fs.telemetry, *from = t, name
		return nil
	}
	if !reflect.DeepEqual(t, fs.telemetry) {
		return fmt.Errorf("%s: telemetry differs from %s: one run has one telemetry section", name, *from)
	}
	return nil
}

// Check reads the pipeline file at path and checks it as a run would,
// without a broker: pipelines.Load's checks, the telemetry section's
// values, and that each script handler's Python imports the SDK
// (runtime.CheckScripts). The error reads FILE:LINE:COL: field: what is
// wrong, a line per problem.
func Check(ctx context.Context, path string, lookupEnv func(string) (string, bool)) (*pipelines.File, error) {
	f, err := pipelines.Load(path, lookupEnv)
	if err != nil {
		return nil, err
	}
	if err := checkTelemetry(f.Telemetry, path); err != nil {
		return nil, err
	}
	if err := runtime.CheckScripts(ctx, f); err != nil {
		return nil, err
	}
	return f, nil
}
