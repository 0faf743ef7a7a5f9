// Package workdir tells a temporary work folder in use from one left
// behind by a killed process: the process that uses a folder holds a lock
// (flock) on a file in it, which the kernel drops when the process dies,
// however it dies (SIGKILL included), so the next process to start can
// remove what the killed one could not.
package workdir

// LockFile, in a work folder, is locked (flock) by the process that
// uses the folder for as long as it runs. The kernel drops the lock when
// that process dies, however it dies, so a work folder whose lock file is
// there but not locked belongs to a process that never cleaned up. A
// folder kept on purpose has no lock file.
const LockFile = "owner.lock"
