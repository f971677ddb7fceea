//! The FUSE methods: each one times itself, calls a plain function returning
//! `Result<_, Errno>`, and replies.

mod attrs;
mod data;
mod dirs;
mod names;
mod rename;

use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileHandle, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request as FuseRequest, TimeOrNow, WriteFlags,
};
use tierwise_core::{ObjectId, Op, Request, Tier};

use crate::HybridFs;
use crate::log;
use crate::metrics::Kind;
use crate::passthrough::PASSTHROUGH_FH;
use crate::shared::{lock, read_lock};
use crate::tiers::OperationScope;
use names::Caller;

const TTL: Duration = Duration::from_secs(1);

fn caller(req: &FuseRequest) -> Caller {
    Caller { uid: req.uid(), gid: req.gid() }
}

fn reply_entry(reply: ReplyEntry, r: Result<fuser::FileAttr, Errno>) {
    match r {
        Ok(a) => reply.entry(&TTL, &a, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn reply_xattr(reply: ReplyXattr, r: Result<Vec<u8>, Errno>, size: u32) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() <= size as usize => reply.data(&v),
        Ok(_) => reply.error(Errno::ERANGE),
        Err(e) => reply.error(e),
    }
}

impl fuser::Filesystem for HybridFs {
    fn init(&mut self, _req: &FuseRequest, config: &mut KernelConfig) -> io::Result<()> {
        let s = &self.shared;
        // Clearing set-id bits and capabilities on write, truncate and chown is ours: without
        // this the kernel asks for `security.capability` before every write (a round trip), and
        // passthrough writes are held to FUSE speed by it.
        let killpriv = config.add_capabilities(fuser::InitFlags::FUSE_HANDLE_KILLPRIV_V2).is_ok();
        s.killpriv.store(killpriv, Ordering::Release);
        if s.cfg.kernel_cache {
            // Written pages are flushed to us later, in batches; reads of cached pages, across
            // opens, never come: the page cache is a RAM tier above the policy. Safe because
            // every change of a file's bytes passes through the kernel (moves copy them unchanged).
            if config.add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE).is_err() {
                log::warn(format_args!(
                    "the kernel does not offer the FUSE writeback cache; writes go through at once"
                ));
            }
        }
        if s.cfg.direct_io && config.add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP).is_err() {
            log::warn(format_args!("the kernel cannot mmap direct-I/O files (Linux >= 6.6); mmap of files will fail"));
        }
        if s.cfg.passthrough && s.passthrough_volumes.iter().any(|&b| b) {
            let granted = config.add_capabilities(fuser::InitFlags::FUSE_PASSTHROUGH).is_ok()
                && config.set_max_stack_depth(1).is_ok();
            if !granted {
                let why = "the kernel does not offer FUSE passthrough (Linux >= 6.9)".to_string();
                log::warn(format_args!("{why}; using regular FUSE I/O"));
                *lock(&s.data_path) = ("regular FUSE I/O".into(), Some(why));
            }
            s.passthrough.store(granted, Ordering::Release);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        // Unmounting: stop after the move in hand, cancelled (it rolls back); queued work is
        // the policy's intent, not state, and every decision that is state (pins, the dirty set,
        // the journal) is in the store. So the daemon exits at once, and `tierwise umount`,
        // which waits for it, returns when nothing touches the tiers any more.
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.progress.cancel.store(true, Ordering::Release);
        self.shared.work_cv.notify_all();
    }

    fn lookup(&self, _req: &FuseRequest, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_entry(reply, names::lookup(&self.shared, parent.0, name));
    }

    fn getattr(&self, _req: &FuseRequest, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        match self.shared.attr(ino.0) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &FuseRequest,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        let change = attrs::Change { mode, uid, gid, atime, mtime };
        // A size change is fenced until its reply is out (short reads wait: `crate::truncation`).
        let truncating = size.map(|_| self.shared.truncations.begin(ino.0));
        // Root keeps set-id bits on truncate (CAP_FSETID), anyone else loses them.
        match attrs::setattr(&self.shared, ino.0, size, change, req.uid() != 0) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
        drop(truncating);
    }

    fn readlink(&self, _req: &FuseRequest, ino: INodeNo, reply: ReplyData) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        match names::readlink(&self.shared, ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, req: &FuseRequest, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_entry(reply, names::mkdir(&self.shared, parent.0, name, mode & !umask, caller(req)));
    }

    fn unlink(&self, _req: &FuseRequest, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_empty(reply, names::unlink(&self.shared, parent.0, name));
    }

    fn rmdir(&self, _req: &FuseRequest, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_empty(reply, names::rmdir(&self.shared, parent.0, name));
    }

    fn symlink(&self, req: &FuseRequest, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_entry(reply, names::symlink(&self.shared, parent.0, link_name, target, caller(req)));
    }

    fn rename(
        &self,
        _req: &FuseRequest,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        if !flags.is_empty() {
            reply.error(Errno::EINVAL);
            return;
        }
        reply_empty(reply, rename::rename(&self.shared, parent.0, name, newparent.0, newname));
    }

    fn link(&self, _req: &FuseRequest, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_entry(reply, names::link(&self.shared, ino.0, newparent.0, newname));
    }

    fn open(&self, _req: &FuseRequest, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        let s = &self.shared;
        // A file on a lost tier answers EIO here, not only at its first read: a handle still
        // open on that tier (its release not in yet) would otherwise serve this open from the
        // detached file system or the kernel's cached pages.
        if Tier::ALL.iter().any(|&t| !s.tiers.root_intact(t)) && s.refresh_health() {
            let copies = s.copies(ino.0);
            if copies.is_empty() || copies.iter().any(|&t| !s.tiers.root_intact(t)) {
                return reply.error(Errno::EIO);
            }
        }
        let n = {
            // Under the open counts' lock (not the file's: a move holds that for its whole
            // copy), under which a rename over the file hides it and the last release of a
            // hidden file forgets it: either came first (the file is hidden, or gone) or finds
            // this open counted.
            let mut counts = lock(&s.open_counts);
            match s.node(ino.0) {
                Ok(n) => {
                    *counts.entry(ino.0).or_default() += 1;
                    n
                }
                Err(e) => return reply.error(e),
            }
        };
        // Pinned and hard-linked files are outside the policy: the engine does not hear of them.
        let pinned = read_lock(&s.pins).contains_key(&ino.0) || read_lock(&s.linked).contains_key(&ino.0);
        if !pinned {
            let class = s.class(&n.rel, n.dir);
            s.tell(&Request::op(ObjectId(ino.0), Op::Open).with_class(class));
        }
        if s.passthrough_for(&n) {
            let writable = flags.acc_mode() != fuser::OpenAccMode::O_RDONLY;
            if let Some(()) = s.open_passthrough(ino.0, &n, writable, pinned, |f| reply.open_backing(f))
                && let Some(e) = lock(&s.backing).get(&ino.0)
            {
                reply.opened_passthrough(FileHandle(PASSTHROUGH_FH), FopenFlags::empty(), &e.id);
                return;
            }
        }
        s.wait_for_kernel_release(ino.0);
        let (fh, open_flags) = s.open_regular(ino.0, flags.acc_mode() != fuser::OpenAccMode::O_RDONLY);
        reply.opened(fh, open_flags);
    }

    fn read(
        &self,
        _req: &FuseRequest,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Read);
        // Not across a size change the kernel has not applied yet (`crate::truncation`).
        let s = &self.shared;
        match s.truncations.read_settled(ino.0, size as usize, || data::read(s, ino.0, offset, size)) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &FuseRequest,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Write);
        let kill_setid = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        match data::write(&self.shared, ino.0, offset, data, kill_setid) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, _req: &FuseRequest, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        let _op = OperationScope::enter();
        reply.ok();
    }

    fn fsync(&self, _req: &FuseRequest, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_empty(reply, data::fsync(&self.shared, ino.0));
    }

    fn fsyncdir(&self, _req: &FuseRequest, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_empty(reply, dirs::fsyncdir(&self.shared, ino.0));
    }

    fn opendir(&self, _req: &FuseRequest, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        match dirs::opendir(&self.shared, ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &FuseRequest, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let _op = OperationScope::enter();
        let dirs = lock(&self.shared.dirs);
        let Some(entries) = dirs.get(&fh.0) else {
            reply.error(Errno::EBADF);
            return;
        };
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn release(
        &self,
        _req: &FuseRequest,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _op = OperationScope::enter();
        data::release(&self.shared, ino.0, fh.0);
        reply.ok();
    }

    fn releasedir(&self, _req: &FuseRequest, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        let _op = OperationScope::enter();
        lock(&self.shared.dirs).remove(&fh.0);
        reply.ok();
    }

    fn statfs(&self, _req: &FuseRequest, _ino: INodeNo, reply: ReplyStatfs) {
        let _op = OperationScope::enter();
        match dirs::statfs(&self.shared) {
            Ok((space, files, files_free)) => {
                let bs = 4096u64;
                reply.statfs(
                    space.size / bs,
                    space.free / bs,
                    space.avail / bs,
                    files,
                    files_free,
                    bs as u32,
                    255,
                    bs as u32,
                );
            }
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        req: &FuseRequest,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_empty(reply, attrs::setxattr(&self.shared, ino.0, name, value, req.uid()));
    }

    fn getxattr(&self, _req: &FuseRequest, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_xattr(reply, attrs::getxattr(&self.shared, ino.0, name), size);
    }

    fn listxattr(&self, _req: &FuseRequest, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_xattr(reply, attrs::listxattr(&self.shared, ino.0), size);
    }

    fn removexattr(&self, req: &FuseRequest, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        reply_empty(reply, attrs::removexattr(&self.shared, ino.0, name, req.uid()));
    }

    fn create(
        &self,
        req: &FuseRequest,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _op = OperationScope::enter();
        let _t = self.shared.latency.timer(Kind::Meta);
        let s = &self.shared;
        let a = match names::create(s, parent.0, name, mode & !umask, caller(req)) {
            Ok(a) => a,
            Err(e) => return reply.error(e),
        };
        let ino = a.ino.0;
        *lock(&s.open_counts).entry(ino).or_default() += 1;
        if let Ok(n) = s.node(ino)
            && s.passthrough_for(&n)
        {
            // A new file is empty: its placement is the engine's allocation, settled.
            let writable = flags & nix::libc::O_ACCMODE != nix::libc::O_RDONLY;
            let pinned = read_lock(&s.pins).contains_key(&ino) || read_lock(&s.linked).contains_key(&ino);
            if let Some(()) = s.open_passthrough(ino, &n, writable, pinned, |f| reply.open_backing(f))
                && let Some(e) = lock(&s.backing).get(&ino)
            {
                reply.created_passthrough(
                    &TTL,
                    &a,
                    Generation(0),
                    FileHandle(PASSTHROUGH_FH),
                    FopenFlags::empty(),
                    &e.id,
                );
                return;
            }
        }
        let (fh, open_flags) = s.open_regular(ino, flags & nix::libc::O_ACCMODE != nix::libc::O_RDONLY);
        reply.created(&TTL, &a, Generation(0), fh, open_flags)
    }
}
