// Package consoletest drives the web console of a running host in a real
// browser (headless Chromium through chromedp): a module of its own, so
// that the browser's driver stays out of the main module's go.mod.
//
// The tests skip unless a Chromium is found: STREAMRUN_CHROMIUM names
// its binary, else chromium-headless-shell, chromium or
// google-chrome in PATH (Debian's chromium-headless-shell package).
// -screenshot FILE writes the console's picture taken mid-run
// (docs/console.png is one).
package consoletest
