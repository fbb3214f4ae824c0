// Package logs rotates the log files of the agent's running containers,
// as the kubelet's container log manager
// (pkg/kubelet/logs/container_log_manager.go) does, so that a container
// writing as fast as it can does not fill the disk; and reads them, for
// `nodeagent logs` and the node server's /containerLogs: one concept,
// the files of a container's log, whose naming both sides share.
//
// A container's log is its live file <log> (the runtime's
// ContainerStatus.LogPath, e.g. <pod-logs-dir>/<ns>_<name>_<uid>/<c>/0.log)
// and up to MaxFiles-1 rotated files: the most recent one uncompressed,
// <log>.<20060102-150405>, the older ones gzipped, <log>.<ts>.gz. A second
// rotation within the same second is named <log>.<ts>_001 (and so on),
// which still sorts after <log>.<ts>.gz, so name order stays age order.
//
//	live ──rename──> live.<ts> ──(next rotation)──> live.<ts>.gz ──(beyond MaxFiles)──> removed
//	  ^                  │ ReopenContainerLog failed: renamed back, retried at the next pass
//	  └──────────────────┘
//
// To rotate, the manager removes the oldest rotated files beyond
// MaxFiles-2, renames the live file, calls ReopenContainerLog so the
// runtime opens a new live file, and then compresses the older
// uncompressed files, each into <file>.tmp renamed to <file>.gz. The
// kubelet compresses before the rename; compressing after it keeps the
// rename-to-reopen time short, and that time is what the writer still
// adds to the rotated file. A stray .tmp, or an original beside its
// complete .gz, left by an interrupted rotation is removed when found,
// and files beyond MaxFiles are removed the first time the manager sees
// a container (after an agent restart, or with a lower MaxFiles). Any
// file named <log>.* counts, as with the kubelet.
//
// When. RotateAll, every MonitorInterval, lists the running containers
// carrying the agent's labels and checks all their files; alone, that
// lets a file pass MaxSize by what is written in one interval (the
// kubelet's behaviour: 100 MB and more per 10s interval for a `yes`).
// So three more things happen in Run:
//   - each check measures how fast the file grows and schedules a cheap
//     stat (CheckDue, no CRI call) halfway to the last moment a rotation
//     could still start in time, no sooner than 50ms apart; a file that
//     does not grow costs nothing between passes;
//   - a file that would pass MaxSize before its next check and the
//     rotation's rename-to-reopen time (the longest seen, decaying; and
//     likewise how late checks ran on a busy node) is rotated a little
//     early; a file that does not grow is rotated at MaxSize, as with the
//     kubelet;
//   - with PodLogsDir, an inotify watch of the pod log directories (file
//     creations only, never writes) reports new <n>.log files, and
//     discovery passes at 50ms, 100ms, 200ms… find their container, which
//     the runtime starts just after it creates the file.
//
// The bound: for a writer at a steady rate, every file stays within
// MaxSize, so a container's log takes at most MaxFiles × MaxSize, plus one
// gzip temporary file while a rotated file is compressed. What can pass
// it: the bytes written while the runtime takes longer than it did
// before to reopen (containerd 2.4 needs 50–150ms, and up to a second,
// with a `yes` saturating this 2-core VM — so a MaxSize must be large
// against rate × that time: at ~10 MB/s, 10Mi files stayed within 5% of
// it, 1Mi files reached 1.5–5 MB), a writer suddenly speeding up (the
// rate estimate follows within a check), and a new container before its
// first check (~100–300ms; without PodLogsDir, one MonitorInterval).
//
// It does not remove the logs of removed containers (internal/cri does).
//
// Reading. Read writes one instance of a container's log (the highest
// <n> of <n>.log, or with Previous the one before) as `kubectl logs`
// shows it: the CRI log lines (<time> <stdout|stderr> <P|F> <msg>) of
// both streams, prefixes stripped, a line's P fragments joined per
// stream (so a line comes out when finished, and the stderr line written
// while stdout was mid-line comes first), lines that do not parse
// skipped as the kubelet does; across the rotated files, gzipped or not,
// in name order, then the live one. TailLines counts finished lines
// from the newest file back to pick the first file to read, then keeps
// the last lines in a ring; SinceTime, Timestamps and LimitBytes apply
// per line, as the kubelet's.
//
// Following (Follow) keeps reading the live file, and, when it is
// rotated, its successors, every line exactly once, until Exited, a newer
// instance's log, or ctx:
//
//	cur (live) ──rename──> cur is the first rotated name that was not there while it was live
//	    │                  (or the rotated file with its inode, while uncompressed)
//	    └─ next file: the next rotated name, else the live file once it has data
//	       and the runtime closed cur (IN_CLOSE_WRITE), or after writerCloseWait;
//	       cur is then still read for drainGrace (late lines out of order, not lost)
//
// Waiting for the runtime's close matters: containerd's old writer still
// writes the lines it had read into the rotated file while its new
// writer writes to the new one, so moving on at the first byte of the
// new file put lines out of order (seen end to end). Inode numbers are
// trusted only for files held open (freed ones are reused at once), and
// every listing that races a rotation is taken again, so a file is never
// skipped nor read twice. What is lost: files the rotator removed before
// the reader got to them (a reader MaxFiles rotations behind). The
// kubelet reads the live file only, and keeps reading the old file after
// a rotation.
//
// Safety. OpenContainerDir takes the pod's namespace, name, UID and the
// container name, validated as the API's (DNS labels and subdomains:
// no '/', no "..", no '_', so no two pods share a directory), and opens
// <root>/<ns>_<name>_<uid>/<container> one component at a time with
// O_NOFOLLOW|O_DIRECTORY relative to its parent; files are opened
// relative to that descriptor with O_NOFOLLOW and must be regular files.
// A single validated component opened with O_NOFOLLOW cannot leave its
// parent, so openat2's RESOLVE_BENEATH adds nothing here. A symlink
// anywhere below the root is refused (ErrUnsafePath), even one that
// stays inside it: the runtime writes real files only.
//
// Concurrency: Run is one goroutine, plus the watcher's, which only
// records new paths. RotateAll and CheckDue each hold the manager's lock
// for their whole step, so they never overlap; within a step up to
// MaxWorkers goroutines check and rotate distinct containers, calling the
// Runtime concurrently. Read is synchronous; a follow adds one inotify
// goroutine, ended before Read returns. Many Reads may run at once, each
// with its own ContainerDir (a ContainerDir is for one reader at a time).
package logs
