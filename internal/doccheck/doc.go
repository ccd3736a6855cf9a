// Package doccheck keeps the project's documents true to the tree. Its tests check
// that every file docs/DESIGN.md's file map names exists, that no document points
// elsewhere than the repository or at the issue tracker, and that the README's
// library snippet is the compiled and run example of package mirror. CheckGenerated
// is what other packages' tests use to keep a generated section of a document (the
// config tables and flag lists of docs/CONFIG.md) equal to what the code renders.
package doccheck
