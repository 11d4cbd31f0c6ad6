// Package archtest holds no code: its test checks that the packages of the
// module import only what docs/architecture.md allows them to.
package archtest
