package main

// checkInput checks the --input flags. Its errors are usage errors.
func (f *produceFlags) checkInput(changed func(string) bool) error {
	if f.input == "" {
		for _, name := range []string{"input-format", "input-key-separator"} {
			if changed(name) {
				return usagef("--%s is for --input", name)
			}
		}
		return nil
	}
	switch {
	case changed("message") || changed("size"):
		return usagef("--input excludes --message and --size: each line is a message")
	case f.inputFormat != "text" && f.inputFormat != "json":
		return usagef("--input-format %q: want text or json", f.inputFormat)
	case f.inputFormat == "json" && f.keySep != "":
		return usagef("--input-key-separator is for --input-format text: a JSON line has its key")
	}
	return nil
}
