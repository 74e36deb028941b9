// The write-behind journal (contract D5): a batch of record operations the service has answered for
// and Postgres has not committed in time (sql/record-writer.ts says when) is appended here, on
// local disk in DATA_DIR, and marked done once Postgres committed it. A node that dies (SIGKILL,
// power) or that is stopped while Postgres is away replays at its next boot what Postgres never
// got; the operations are idempotent (keyed by the provider's ids, guarded by status), so
// replaying one that did commit changes nothing.
//
// Format: JSON lines in segment files `wal-<pid>-<startMs>-<n>.jsonl`. The first line of a segment
// names the database it belongs to (`{"db":…}`), then `{"b":seq,"d":done,"ops":[…]}` per batch,
// where `d` says that every batch up to that seq is committed (batches commit in order), and a
// lone `{"d":seq}` when the journal goes idle. Appends are grouped: all lines queued while a write
// is on its way go out in the next single write, durable when it returns (O_DSYNC; async, off the
// event loop). A segment is deleted once every batch in it is done; a new one is started when it
// grows past `segmentBytes`.
// A torn last line (the process died mid-write) is ignored: its batch never reached the disk, so
// nobody was told it was durable.
import { constants } from 'node:fs'
import { open, readdir, readFile, unlink, mkdir, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'

export interface JournalEntry {
  readonly seq: number
  /** The segment and the byte range of the batch line, to read a spilled batch back. */
  readonly segment: Segment
  readonly offset: number
  readonly length: number
}

interface Segment {
  path: string
  fh: FileHandle
  size: number
  /** Batches written to it and not yet done. */
  open: number
  /** Still taking appends. */
  current: boolean
}

export interface ReplayBatch {
  seq: number
  ops: unknown[]
}

export interface Journal {
  /**
   * Appends one batch, its operations given as the JSON text of their array (the record writer
   * writes each operation's events once for this line and the statement: sql/record-apply.ts
   * opsJson); resolves when it is on disk, or null when the disk refused it.
   */
  append(opsJson: string): Promise<JournalEntry | null>
  /** The batch committed in Postgres: it will not be replayed. */
  done(entry: JournalEntry): void
  /** Reads a batch back (one whose operations were dropped from memory under the memory bound). */
  read(entry: JournalEntry): Promise<unknown[]>
  /** Batches on disk and not yet done (metrics, tests). */
  readonly pendingBatches: number
  close(): Promise<void>
}

const SEGMENT_RE = /^wal-(\d+)-(\d+)-(\d+)\.jsonl$/

function pidAlive(pid: number): boolean {
  if (pid === process.pid) return false // our own, from a previous life with the same pid
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** An earlier run's batches to apply, and the files they came from (deleted once applied). */
export interface Leftovers { batches: ReplayBatch[]; files: string[] }

/**
 * The batches left behind by earlier runs for this database, in the order they were written, and
 * the files that hold them (delete them once the batches are applied). Segments of a process that
 * is still running (another node sharing DATA_DIR) are left alone; segments of another database
 * too.
 */
export async function readLeftovers(dir: string, dbId: string): Promise<Leftovers> {
  let names: string[]
  try {
    names = await readdir(dir)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { batches: [], files: [] }
    throw err
  }
  const segments = names
    .map(name => ({ name, m: SEGMENT_RE.exec(name) }))
    .filter((s): s is { name: string; m: RegExpExecArray } => s.m !== null && !pidAlive(Number(s.m[1])))
    .sort((a, b) => Number(a.m[2]) - Number(b.m[2]) || Number(a.m[3]) - Number(b.m[3]) || a.name.localeCompare(b.name))
  const batches: ReplayBatch[] = []
  const files: string[] = []
  // One run of a process (pid and start time) numbers its batches in one sequence across its
  // segments, and its done marks cover all of them.
  let run = ''
  let open = new Map<number, unknown[]>()
  let doneUpTo = 0
  const endRun = () => {
    for (const [seq, ops] of open) if (seq > doneUpTo) batches.push({ seq, ops })
    open = new Map()
    doneUpTo = 0
  }
  for (const s of segments) {
    const path = join(dir, s.name)
    const lines = (await readFile(path, 'utf8')).split('\n')
    let header: { db?: string } | null = null
    try { header = JSON.parse(lines[0] ?? '') as { db?: string } } catch { /* torn header: nothing was written after it */ }
    if (header !== null && header.db !== dbId) continue
    files.push(path)
    if (`${s.m[1]}-${s.m[2]}` !== run) {
      endRun()
      run = `${s.m[1]}-${s.m[2]}`
    }
    for (const line of lines.slice(1)) {
      if (line === '') continue
      let rec: { b?: number; ops?: unknown[]; d?: number }
      try { rec = JSON.parse(line) as typeof rec } catch { continue } // the torn last line
      if (typeof rec.b === 'number' && Array.isArray(rec.ops)) open.set(rec.b, rec.ops)
      if (typeof rec.d === 'number' && rec.d > doneUpTo) doneUpTo = rec.d
    }
  }
  endRun()
  return { batches, files }
}

export async function openJournal(opts: { dir: string; dbId: string; segmentBytes?: number; onError?: (code: string) => void }): Promise<Journal> {
  const segmentBytes = opts.segmentBytes ?? 64 * 1024 * 1024
  const onError = opts.onError ?? (() => {})
  await mkdir(opts.dir, { recursive: true })
  const started = Date.now()
  let segmentNo = 0
  let seq = 0
  let doneUpTo = 0
  let pendingBatches = 0
  let current: Segment | null = null
  let closed = false

  /** Lines waiting for the next grouped write, with who waits for them. */
  let queue: Array<{ line: string; segmentOpen: boolean; resolve: (e: JournalEntry | null) => void; seq: number }> = []
  let idleMark: NodeJS.Timeout | null = null
  let writing: Promise<void> | null = null

  async function newSegment(): Promise<Segment> {
    const path = join(opts.dir, `wal-${process.pid}-${started}-${++segmentNo}.jsonl`)
    // O_DSYNC: each write returns once its data is on disk, so a group costs one trip through
    // libuv's thread pool instead of two (write, then fdatasync). Handing a job to the pool costs
    // the event loop ~25 µs of CPU on the 2-vCPU VMs here (presumably the wake-up of a worker
    // thread), measured on the main thread's own CPU clock (bench/RESULTS.md, "What moved the figures", 6a18633).
    // Read too: spilled batches are read back.
    const fh = await open(path, constants.O_APPEND | constants.O_CREAT | constants.O_RDWR | constants.O_DSYNC)
    const header = `${JSON.stringify({ db: opts.dbId, pid: process.pid, at: new Date().toISOString() })}\n`
    await fh.write(header)
    return { path, fh, size: Buffer.byteLength(header), open: 0, current: true }
  }

  async function retire(s: Segment): Promise<void> {
    await s.fh.close().catch(() => {})
    await unlink(s.path).catch(() => {})
  }

  async function writeQueued(): Promise<void> {
    while (queue.length > 0) {
      const lines = queue
      queue = []
      if (current === null || current.size >= segmentBytes) {
        const old = current
        current = await newSegment()
        if (old) {
          old.current = false
          if (old.open === 0) await retire(old)
        }
      }
      const seg: Segment = current
      const text = lines.map(l => l.line).join('')
      const buf = Buffer.from(text)
      const base = seg.size
      try {
        await seg.fh.write(buf, 0, buf.length, null) // durable on return: O_DSYNC (newSegment)
      } catch (err) {
        // A full or broken disk: the batch still goes to Postgres (the journal is the safety net,
        // not the path), but nobody may count on it surviving a crash.
        onError((err as NodeJS.ErrnoException).code ?? 'journal-write')
        for (const l of lines) l.resolve(null)
        continue
      }
      seg.size += buf.length
      let at = base
      for (const l of lines) {
        const length = Buffer.byteLength(l.line)
        if (l.segmentOpen) seg.open++
        l.resolve({ seq: l.seq, segment: seg, offset: at, length })
        at += length
      }
    }
  }

  function enqueue(line: string, s: number, segmentOpen: boolean): Promise<JournalEntry | null> {
    return new Promise(resolve => {
      queue.push({ line, resolve, seq: s, segmentOpen })
      writing ??= writeQueued().finally(() => { writing = null })
    })
  }

  const journal: Journal = {
    get pendingBatches() { return pendingBatches },
    async append(opsJson) {
      const s = ++seq
      const entry = await enqueue(`{"b":${s},"d":${doneUpTo},"ops":${opsJson}}\n`, s, true)
      if (entry) pendingBatches++
      return entry
    },
    done(entry) {
      pendingBatches--
      if (entry.seq > doneUpTo) doneUpTo = entry.seq
      const seg = entry.segment
      if (--seg.open > 0) return
      if (!seg.current) {
        void retire(seg)
        return
      }
      // Everything so far is committed. Say so on disk once things are quiet (a busy journal says
      // it in the next batch's line), so a restart does not replay what Postgres already has.
      if (idleMark === null) {
        idleMark = setTimeout(() => {
          idleMark = null
          if (pendingBatches === 0 && !closed) void enqueue(`${JSON.stringify({ d: doneUpTo })}\n`, doneUpTo, false)
        }, 100)
        idleMark.unref()
      }
    },
    async read(entry) {
      const buf = Buffer.alloc(entry.length)
      await entry.segment.fh.read(buf, 0, entry.length, entry.offset)
      return (JSON.parse(buf.toString('utf8')) as { ops: unknown[] }).ops
    },
    async close() {
      if (closed) return
      closed = true
      if (idleMark) clearTimeout(idleMark)
      while (writing) await writing
      if (current) {
        const last = current
        current = null
        if (last.open === 0) await retire(last)
        else await last.fh.close().catch(() => {})
      }
    },
  }
  return journal
}
