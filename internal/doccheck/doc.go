// Package doccheck holds the tests that keep the project's documents true to the
// tree: every file docs/DESIGN.md's file map names exists, no document points
// elsewhere than the repository or at the issue tracker, and the README's library
// snippet is the compiled and run example of package mirror. It has no code of
// its own; its tests run with the rest of the suite.
package doccheck
