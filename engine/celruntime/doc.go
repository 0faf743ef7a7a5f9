// Package celruntime is the CEL runtime every CEL kind of the engine
// shares (ValidatingPolicy, MutatingPolicy, GeneratingPolicy,
// ImageValidatingPolicy, DeletingPolicy, and ClusterPolicy's validate.cel):
// the environments and the compiler (k8s.io/apiserver's admission CEL
// compiler extended with Kyverno's libraries), Fields, the one helper that
// compiles a policy's expressions, variables and conditions and reports
// each fault at its field, a request's Inputs and Activation, the
// Evaluator with its cost budget, the variables shared across policies,
// match constraints, policies.kyverno.io PolicyExceptions, and the lazily
// compiled autogen variants.
package celruntime
