// Package archtest holds no code: its test checks that the packages of the
// module import only what docs/design.md allows them to.
package archtest
