"""The compile cache on disk (CACHEDIR), the checks that keep anyone else's files out of it, and the private folder
compiled code is written to and loaded from. Imports flags and helpers.

Only what is the user's own is used: the cache root and the folders in it must be owned by the effective uid and not
be writable by group or others, an entry must be such a regular file (no link is followed, no pipe or device is
opened), and each folder above the root may be changed only by the user or root (or be sticky, as /tmp is). Anything
else is refused with one warning on stderr, and this process does not use that cache again. Files of the user's own
can still come from elsewhere (a cache copied or restored from another machine), so each entry also carries a MAC made
with the user's secret key (CACHE_SECRET, outside the cache): an entry made with another key, or under another name,
is a miss.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import hmac
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from specgrad.flags import CACHE_SECRET, CACHEDIR, DEBUG
from specgrad.helpers import atomic_write

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# NOTE: O_NONBLOCK: a named pipe where an entry should be opens at once (and is then refused), without a writer
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
ENTRY_MODE = 0o600
KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFDIR: "a folder", stat.S_IFREG: "a regular file",
         stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device"}  # fmt: skip
LOCK_WAIT_S = 120.0  # NOTE: longest wait for another process's build of a kernel before building it here too
NOTICE = "specgrad: not using the kernel cache"
OWN = "or set CACHEDIR to a folder of your own"

MAC_BYTES = 32  # NOTE: HMAC-SHA256, at the start of every DiskCache entry
MAC_FORMAT = b"specgrad kernel cache 1\0"  # NOTE: a MAC of another format (or use) never matches one of these
SECRET_BYTES, SECRET_MIN, SECRET_MAX = 32, 16, 4096  # the key made; the shortest and longest one read

_LOCK = threading.Lock()
_REFUSED: set[str] = set()  # CACHEDIR values refused in this process
_PRIVATE: dict[int, str] = {}  # pid -> its private folder
_SECRET_LOCK = threading.Lock()
_SECRETS: dict[str, bytes | None] = {}  # CACHE_SECRET path -> its key, None where refused (once per process)


class Refused(Exception):
    """A path the cache must not use: which, what is wrong with it, and how to fix it."""

    def __init__(self, path: str, problem: str, fix: str):
        super().__init__(f"{path} {problem}")
        self.path, self.problem, self.fix = path, problem, fix


class CacheRefused(Refused):
    """The cache folder itself is refused (and said so): its key is not looked at."""


def kind(mode: int) -> str:
    return KINDS.get(stat.S_IFMT(mode), "not a file")


def writers(mode: int) -> str:
    return "its group and others" if mode & 0o022 == 0o022 else "its group" if mode & 0o020 else "others"


def removal(path: str, is_dir: bool) -> str:
    return f"To fix it: remove it ({'rm -r' if is_dir else 'rm'} {path}), {OWN}"


def check_own(path: str, st: os.stat_result, is_dir: bool) -> None:
    """Refuse a cache folder (is_dir) or entry that is another kind of file, is someone else's, or that others can
    write."""
    want, uid = stat.S_IFDIR if is_dir else stat.S_IFREG, os.geteuid()
    if stat.S_IFMT(st.st_mode) != want:
        raise Refused(path, f"is {kind(st.st_mode)}, not {KINDS[want]}", removal(path, stat.S_ISDIR(st.st_mode)))
    if st.st_uid != uid:
        raise Refused(path, f"is owned by uid {st.st_uid}, not by you (uid {uid})", removal(path, is_dir))
    if st.st_mode & 0o022:
        fix = (
            "It is a shared folder (sticky, like /tmp): leave it as it is, and set CACHEDIR to a folder of your own"
            if st.st_mode & stat.S_ISVTX
            else f"To fix it: chmod {'700' if is_dir else '600'} {path} if you trust what it holds, else remove it "
            f"({'rm -r' if is_dir else 'rm'} {path}); {OWN}"
        )
        raise Refused(path, f"is writable by {writers(st.st_mode)}", fix)


def check_above(path: str, st: os.stat_result) -> None:
    """Refuse a folder above the cache root (or the private folder) that someone but the user or root can change:
    they could swap what lies below it."""
    fix = "To fix it: set CACHEDIR to a folder of your own whose parent folders only you or root can change"
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(path, f"is {kind(st.st_mode)}, not a folder", fix)
    if st.st_uid not in (0, os.geteuid()):
        raise Refused(path, f"is owned by uid {st.st_uid} (neither you nor root), who could swap the folders in it",
                      fix)  # fmt: skip
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise Refused(path, f"is writable by {writers(st.st_mode)} without the sticky bit, so they could swap the "
                            "folders in it", fix)  # fmt: skip


def make_private_dir(path: str | Path, dir_fd: int | None = None) -> None:
    """mkdir 0700 whatever the umask; a folder (or anything) already there is left as it is, to be checked."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700, dir_fd=dir_fd)
        os.chmod(path, 0o700, dir_fd=dir_fd)


def resolve_root(given: str, create: bool) -> str:
    """The folder CACHEDIR names, links resolved, with every folder above it checked (and made 0700 where missing,
    when `create`). A root that is itself a link must be the user's or root's link."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK((st := os.lstat(given)).st_mode) and st.st_uid not in (0, os.geteuid()):
            raise Refused(given, f"is a symbolic link owned by uid {st.st_uid}, not by you", removal(given, False))
    real = Path(os.path.realpath(given))
    for folder in [*reversed(real.parents), real]:
        if create and not os.path.lexists(folder):
            make_private_dir(folder)
        st = os.lstat(folder)  # NOTE: FileNotFoundError when missing (and not `create`): no cache yet
        if folder != real:
            check_above(str(folder), st)
    return str(real)


def open_dir(path: str, name: str | None = None, dir_fd: int | None = None, create: bool = False) -> int:
    """A descriptor of the folder `name` in `dir_fd` (else `path`), checked to be the user's own through that
    descriptor, so what is checked is what is used; made 0700 when missing and `create`."""
    where = name if name is not None else path
    if create:
        make_private_dir(where, dir_fd)
    try:
        fd = os.open(where, DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError:
        check_own(path, os.lstat(where, dir_fd=dir_fd), is_dir=True)  # NOTE: says what is there instead (a link)
        raise
    try:
        check_own(path, os.fstat(fd), is_dir=True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def refuse(given: str, e: Refused) -> None:
    """Stop using the cache `given` in this process, saying once why and how to fix it."""
    with _LOCK:
        if given in _REFUSED:
            return
        _REFUSED.add(given)
    print(f"{NOTICE} {given} in this process: {e.path} {e.problem}, and only folders and files of your own that "
          f"nobody else can write are used. {e.fix}. Kernels are compiled afresh meanwhile.", file=sys.stderr,
          flush=True)  # fmt: skip


def open_namespace(namespace: str, create: bool) -> tuple[int, str] | None:
    """A checked descriptor of CACHEDIR/<namespace> and its path; None where the cache is not used: missing, refused
    (with the warning) or out of reach (a read-only disk)."""
    given = os.path.abspath(str(CACHEDIR.value))
    if given in _REFUSED:
        return None
    try:
        root = resolve_root(given, create)  # NOTE: at each use (a few syscalls), as everything below it
        root_fd = open_dir(root)
        try:
            return open_dir(os.path.join(root, namespace), namespace, root_fd, create), os.path.join(root, namespace)
        finally:
            os.close(root_fd)
    except Refused as e:
        refuse(given, e)
    except OSError as e:
        if create and DEBUG >= 1:
            print(f"compile cache: cannot use {given}: {e}")
    return None


def read_entry(namespace: str, name: str) -> bytes | None:
    """The bytes of CACHEDIR/<namespace>/<name>, read from one descriptor checked (fstat) to be a regular file of the
    user's own that nobody else can write; None where it is missing or the cache is not used."""
    if (folder := open_namespace(namespace, create=False)) is None:
        return None
    dir_fd, path = folder[0], os.path.join(folder[1], name)
    try:
        check_own(path, os.lstat(name, dir_fd=dir_fd), is_dir=False)  # NOTE: before opening: no device is opened
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        try:
            check_own(path, os.fstat(fd), is_dir=False)
            with open(fd, "rb", closefd=False) as f:
                return f.read()
        finally:
            os.close(fd)
    except Refused as e:
        refuse(os.path.abspath(str(CACHEDIR.value)), e)
    except OSError:
        pass  # NOTE: missing, or unreadable: a miss
    finally:
        os.close(dir_fd)
    return None


def write_entry(namespace: str, name: str, data: bytes) -> str | None:
    """Write CACHEDIR/<namespace>/<name> (0600) in a checked folder, made 0700 if missing; its path, or None where the
    cache is not used or the write failed (a full or read-only disk costs speed, never correctness)."""
    if (folder := open_namespace(namespace, create=True)) is None:
        return None
    (dir_fd, where), name = folder, re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    staged = f".{name}.{os.urandom(6).hex()}.new"
    try:
        # NOTE: atomic_write gives a new file 0666 less the umask (0664 under umask 002, which readers refuse), so the
        # entry is written under another name, made 0600, then renamed: no reader sees it writable by others
        atomic_write(os.path.join(where, staged), data)
        os.chmod(staged, ENTRY_MODE, dir_fd=dir_fd)
        os.replace(staged, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return os.path.join(where, name)
    except (OSError, ValueError) as e:
        with contextlib.suppress(OSError):
            os.unlink(staged, dir_fd=dir_fd)
        if DEBUG >= 1:
            print(f"compile cache: could not write {os.path.join(where, name)}: {e}")
        return None
    finally:
        os.close(dir_fd)


def lock_name(key: str) -> str:
    """The lock file of `key`'s stripe: keys with the same first two characters share one."""
    return f"lock-{key[:2]}"


@contextlib.contextmanager
def locked(namespace: str, key: str) -> Iterator[None]:
    """Hold the lock of `key`'s stripe (one of 256 files CACHEDIR/<namespace>/lock-XX, XX its first two characters)
    for the duration of the block, so that processes sharing the cache build each kernel once: the second waits for
    the first, then finds its entry. A lock held past LOCK_WAIT_S (a stopped process) is waited for no longer, and
    where the cache is not used (or the lock file is not the user's own) the block runs unlocked: a lock saves work,
    it never blocks a build for good."""
    fd = _open_lock(namespace, lock_name(key))
    if fd is None:
        yield
        return
    try:
        deadline, pause = time.monotonic() + LOCK_WAIT_S, 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        yield
    finally:
        os.close(fd)  # NOTE: closing the descriptor releases its lock


def _open_lock(namespace: str, name: str) -> int | None:
    """A descriptor of the lock file `name` in CACHEDIR/<namespace> (made 0600 when missing), checked to be a regular
    file of the user's own; None where the cache is not used or the file is refused."""
    if (folder := open_namespace(namespace, create=True)) is None:
        return None
    dir_fd, path = folder[0], os.path.join(folder[1], name)
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, ENTRY_MODE,
                     dir_fd=dir_fd)  # fmt: skip
    except OSError:
        return None  # NOTE: a link or something else where the lock should be, or a read-only disk: no lock
    finally:
        os.close(dir_fd)
    try:
        check_own(path, os.fstat(fd), is_dir=False)
    except Refused:
        os.close(fd)
        return None
    return fd


class DiskCache:
    """Binaries on disk under CACHEDIR/<namespace>/<key>.bin, each prefixed by its MAC (`sign`): an entry damaged, made
    with another key (copied from another user, machine or installation) or moved to another name is rebuilt, never
    loaded; only the user's own files are read (above). Entries are written under another name and renamed into place,
    so processes can share it. Without a usable key (`cache_secret`) nothing is read or written."""

    def __init__(self, namespace: str):
        self.namespace = namespace

    def get(self, key: str) -> bytes | None:
        if (secret := cache_secret()) is None:
            return None
        data = read_entry(self.namespace, f"{key}.bin")
        if data is None or len(data) <= MAC_BYTES:
            return None
        mac, payload = data[:MAC_BYTES], data[MAC_BYTES:]
        if hmac.compare_digest(mac, sign(secret, self.namespace, key, payload)):
            return payload
        if DEBUG >= 2:
            print(f"compile cache: {self.namespace}/{key}.bin is damaged or was not made with your key: rebuilt")
        return None

    def put(self, key: str, payload: bytes) -> None:
        if (secret := cache_secret()) is not None:
            write_entry(self.namespace, f"{key}.bin", sign(secret, self.namespace, key, payload) + payload)

    def building(self, key: str) -> contextlib.AbstractContextManager[None]:
        """Held while the entry of `key` is built: see `locked` (no lock where the cache is not used)."""
        return locked(self.namespace, key) if cache_secret() is not None else contextlib.nullcontext()


# *** the key that binds each entry to its name and to this user's installation ***


def sign(secret: bytes, namespace: str, key: str, payload: bytes) -> bytes:
    """The MAC of an entry: HMAC-SHA256 under the user's key of its namespace, its key and its bytes, so an entry is
    good only where it was made (this key), and only under its own name."""
    mac = hmac.new(secret, MAC_FORMAT + f"{namespace}\0{key}\0".encode(), hashlib.sha256)
    mac.update(payload)
    return mac.digest()


def folder_tag(secret: bytes, use: str) -> str:
    """A folder name's suffix only this key gives (16 hex digits), for files the cache cannot sign one by one."""
    return hmac.new(secret, MAC_FORMAT + f"folder {use}".encode(), hashlib.sha256).hexdigest()[:16]


def cache_secret() -> bytes | None:
    """The user's key (the file CACHE_SECRET names, made on first use), read once per process; None where it cannot
    be made or read safely, said once on stderr: the cache is then not used at all."""
    path = os.path.abspath(str(CACHE_SECRET.value))
    # NOTE: the path every lookup takes goes without the lock; b"" stands for "not read yet" (no key is that short)
    if (ret := _SECRETS.get(path, b"")) != b"":
        return ret
    with _SECRET_LOCK:
        if path not in _SECRETS:
            try:
                _SECRETS[path] = load_secret(path)
            except CacheRefused:
                _SECRETS[path] = None  # NOTE: the cache itself is refused, and its warning says enough
            except Refused as e:
                _SECRETS[path] = None
                where = "" if e.path == path else f": {e.path}"  # NOTE: a folder above it
                print(f"{NOTICE} in this process: its key {path}{where} {e.problem}, and the key that signs the "
                      "cache's entries must be a file of your own that nobody else can read or write, in folders only "
                      f"you (or root) can change. {e.fix}. Kernels are compiled afresh meanwhile.", file=sys.stderr,
                      flush=True)  # fmt: skip
        return _SECRETS[path]


def load_secret(path: str) -> bytes:
    """The key in `path`, made (SECRET_BYTES from os.urandom, 0600) where missing, in a folder made 0700 if missing;
    the folder and the folders above it are checked as the cache root's are, the file as a cache entry is and also
    for readers. Raises Refused with what is wrong and how to fix it."""
    folder, name = os.path.split(path)
    given = os.path.abspath(str(CACHEDIR.value))
    cache = os.path.realpath(given)
    if (inside := os.path.realpath(folder)) == cache or inside.startswith(cache.rstrip(os.sep) + os.sep):
        try:  # NOTE: a cache refused anyway (CACHEDIR=/tmp) is said once, as itself
            os.close(open_dir(resolve_root(given, create=False)))
        except Refused as e:
            refuse(given, e)
            raise CacheRefused(given, e.problem, e.fix) from None
        except OSError:
            pass
        raise Refused(path, f"lies inside the kernel cache ({cache}), so a cache copied from elsewhere would bring "
                            "its own key", "To fix it: set CACHE_SECRET to a file outside CACHEDIR, or unset it for "
                            "the default")  # fmt: skip
    try:
        real = resolve_root(folder, create=True)
        dir_fd = open_dir(real)
    except Refused as e:
        raise Refused(e.path, e.problem, "To fix it: make that folder yours and closed to others, or set CACHE_SECRET "
                                         "to a file in a folder of your own") from None  # fmt: skip
    except OSError as e:
        raise Refused(folder, f"cannot be made or opened ({e.strerror or e})", "To fix it: set CACHE_SECRET to a file "
                              "in a folder of your own that can be written") from None  # fmt: skip
    shown = os.path.join(real, name)
    try:
        try:
            st = os.lstat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            make_secret(shown, name, dir_fd)
            st = os.lstat(name, dir_fd=dir_fd)
        check_secret(shown, st)  # NOTE: before opening: no device or pipe is opened
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        try:
            check_secret(shown, os.fstat(fd))
            with open(fd, "rb", closefd=False) as f:
                ret = f.read(SECRET_MAX + 1)
        finally:
            os.close(fd)
    except OSError as e:
        fix = "To fix it: remove it if it is there, or set CACHE_SECRET to a file in a folder of your own you can write"
        raise Refused(shown, f"cannot be made or read ({e.strerror or e})", fix) from None
    finally:
        os.close(dir_fd)
    if not SECRET_MIN <= len(ret) <= SECRET_MAX:
        raise Refused(shown, f"holds {len(ret) if len(ret) <= SECRET_MAX else 'more than ' + str(SECRET_MAX)} bytes, "
                             f"not a key of {SECRET_MIN} to {SECRET_MAX}", _renew(shown))  # fmt: skip
    return ret


def make_secret(shown: str, name: str, dir_fd: int) -> None:
    """Write a new key under another name (O_EXCL, 0600 whatever the umask, synced), then link it into place, so no
    reader ever sees a part of one; where another process linked its key first, that one is kept."""
    staged = f".{name}.{os.urandom(6).hex()}.new"
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, ENTRY_MODE,
                 dir_fd=dir_fd)  # fmt: skip
    try:
        os.fchmod(fd, ENTRY_MODE)
        os.write(fd, os.urandom(SECRET_BYTES))
        os.fsync(fd)
        os.close(fd)
        try:
            os.link(staged, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            pass  # NOTE: another process made one at the same moment: both use it
        except OSError:
            # NOTE: a file system without hard links: two processes racing here may each use their own key for a
            # moment, which costs rebuilt entries, never a wrong load
            if not _exists(name, dir_fd):
                os.rename(staged, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(staged, dir_fd=dir_fd)
    if DEBUG >= 1:
        print(f"compile cache: made a new key in {shown}: entries made with another one are rebuilt")


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def check_secret(path: str, st: os.stat_result) -> None:
    """Refuse a key file that is another kind of file, someone else's, or that others can read or write (whoever can
    read it can make entries this process would load)."""
    uid = os.geteuid()
    if stat.S_ISDIR(st.st_mode):  # NOTE: CACHE_SECRET=. names a folder: never advise removing it
        raise Refused(path, "is a folder, not a regular file", "To fix it: set CACHE_SECRET to the path of a file "
                            "(it is made on first use), or unset it for the default")  # fmt: skip
    if not stat.S_ISREG(st.st_mode):
        raise Refused(path, f"is {kind(st.st_mode)}, not a regular file", _renew(path))
    if st.st_uid != uid:
        raise Refused(path, f"is owned by uid {st.st_uid}, not by you (uid {uid})", _renew(path))
    if st.st_mode & 0o077:
        group, others = st.st_mode & 0o070, st.st_mode & 0o007
        who = "its group and others" if group and others else "its group" if group else "others"
        raise Refused(path, f"can be read or written by {who}", _renew(path) + " (someone who read it could "
                            "have copied it, so chmod alone is not enough)")  # fmt: skip


def _renew(path: str) -> str:
    return f"To fix it: remove it (rm {path}); a new key is made at the next run and the cache is rebuilt once"


def private_folder() -> str:
    """This process's own folder for compiled code (mkdtemp: a new name, 0700) in the temporary folder, once the
    folders above it are checked as the cache root's are; removed at exit. Nobody else can add, swap or change a file
    in it, so a library written there is the library loaded. Refused (an unsafe TMPDIR) with the reason."""
    pid = os.getpid()
    with _LOCK:
        if (ret := _PRIVATE.get(pid)) is None:
            base = Path(os.path.realpath(tempfile.gettempdir()))
            for folder in [*reversed(base.parents), base]:
                check_above(str(folder), os.lstat(folder))
            ret = tempfile.mkdtemp(prefix="specgrad-", dir=base)
            check_own(ret, os.lstat(ret), is_dir=True)
            _PRIVATE[pid] = ret
            atexit.register(_remove_private, pid, ret)
    return ret


def _remove_private(pid: int, folder: str) -> None:
    if os.getpid() == pid:  # NOTE: a forked child leaves its parent's folder alone
        shutil.rmtree(folder, ignore_errors=True)
