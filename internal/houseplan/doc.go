// Package houseplan holds the test that the house plan's arrows
// (../shared/DESIGN.md, "Rooms") hold between charter's own packages, as
// docs/architecture.md states them. It has no code of its own.
package houseplan
