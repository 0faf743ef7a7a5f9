package charter

// BackgroundFieldManager is the field manager of every object charter's
// background controller writes (generated downstream objects, patched
// mutate-existing targets). Admission reads it from the request's options
// to recognise the controller's own writes when the controller shares its
// identity with people or other programs (charter dev runs as the
// developer's kubeconfig user): such a write does not trigger generate and
// mutate-existing rules again unless a rule sets skipBackgroundRequests:
// false (background-cleanup.md §2.2, the loop breaker).
const BackgroundFieldManager = "charter-background"
