// Package review holds what one evaluation of policies is about, shared by
// the engine's root and the packages of each policy kind under engine/:
// the Request and the View every kind reads of it, the evaluation's
// Options, a rule's Outcome, and the responses (PolicyResponse,
// RuleResponse) the engine's root gives back under its own names.
package review
