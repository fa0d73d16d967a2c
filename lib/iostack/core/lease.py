"""A lock every host honours, for a deployment root on a shared file system: flock(2) is not
seen across the nodes of some (NFS without lock service, some Lustre mounts), so the lock is
a file created with O_CREAT|O_EXCL (atomic on NFSv3+ and Lustre) that says who holds it:

    {"host": ..., "pid": ..., "user": ..., "what": ..., "started": ..., "lease_until": ...,
     "token": ...}

The holder renews its lease while it runs (a thread, every RENEW_EVERY of the lease); a
holder that died on another host is known only by its lease running out, so a lease past its
end may be taken over, and so may a lock of this host whose process is gone. Times are UTC:
the hosts' clocks must agree (NTP) to well within the lease.
"""
from __future__ import annotations

import logging
import contextlib
import datetime
import getpass
import json
import os
import pathlib
import socket
import threading
import uuid

from iostack.core.errors import IostackError

log = logging.getLogger(__name__)

#: seconds a holder's lease runs unless renewed; how long a crashed host blocks the others
LEASE = 600.0
RENEW_EVERY = 0.25
STAMP = "%Y-%m-%dT%H:%M:%SZ"


class Held(IostackError):
    """Another live holder has the lock: nothing was done."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _stamp(when: datetime.datetime) -> str:
    return when.strftime(STAMP)


def _parse(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, STAMP).replace(tzinfo=datetime.timezone.utc)


def _read(path: pathlib.Path) -> dict | None:
    """The holder's record; None when there is no lock; {} when it cannot be read (half
    written by a holder that died between creating and writing it, or damaged)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _alive_here(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        pass
    return True


def _stale(path: pathlib.Path, holder: dict, host: str) -> str | None:
    """Why `holder`'s lock may be taken over, or None while it is live."""
    try:
        until = _parse(holder["lease_until"])
    except (KeyError, TypeError, ValueError):
        # unreadable: live while young (its holder may be writing it), stale after a lease
        try:
            age = _now().timestamp() - path.stat().st_mtime
        except FileNotFoundError:
            return "gone"
        return f"unreadable for {age:.0f} s" if age > LEASE else None
    if until < _now():
        return f"its lease ended at {holder['lease_until']}"
    if holder.get("host") == host and not _alive_here(holder.get("pid")):
        return f"its pid {holder.get('pid')} is gone from this host"
    return None


def _describe(holder: dict) -> str:
    if not holder:
        return "a holder whose record cannot be read yet"
    return (f"{holder.get('what', 'a command')} on host {holder.get('host', '?')} (pid "
            f"{holder.get('pid', '?')}, user {holder.get('user', '?')}, since "
            f"{holder.get('started', '?')})")


def _take_over(path: pathlib.Path, judged: dict) -> bool:
    """Remove the stale lock `judged`; False if it changed meanwhile (then nothing removed).
    Renamed aside first, so of two hosts taking it over at once only one removes it; the
    other finds the new holder's record under its name and puts it back (link(2) does not
    replace a lock created meanwhile)."""
    aside = path.with_name(f"{path.name}.stale.{socket.gethostname()}.{os.getpid()}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    if _read(aside) != judged:
        with contextlib.suppress(FileExistsError):
            os.link(aside, path)
        aside.unlink()
        return False
    aside.unlink()
    return True


def _write(path: pathlib.Path, record: dict) -> None:
    tmp = path.with_name(f"{path.name}.{record['token']}.tmp")
    tmp.write_text(json.dumps(record, sort_keys=True) + "\n")
    os.replace(tmp, path)


@contextlib.contextmanager
def hold(path: pathlib.Path, what: str, lease: float = LEASE):
    """Hold the lock file `path` for the block; refuse (Held, one line naming the holder's
    host and the end of its lease) while another holder's lease runs."""
    host = socket.gethostname()
    record = {"host": host, "pid": os.getpid(), "user": getpass.getuser(), "what": what,
              "token": uuid.uuid4().hex}
    for _attempt in range(5):
        record["started"] = _stamp(_now())
        record["lease_until"] = _stamp(_now() + datetime.timedelta(seconds=lease))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = _read(path)
            if holder is None:
                continue                      # released meanwhile: try again
            why = _stale(path, holder, host)
            if why is None:
                until = holder.get("lease_until")
                raise Held(f"{path.parent} is in use by {_describe(holder)}: nothing was done; "
                           "try again when it ends"
                           + (f", or after its lease ends at {until} (a lease past its end "
                              "is taken over)" if until else "")) from None
            if _take_over(path, holder):
                log.info(f"note: took over {path} from {_describe(holder)}: {why}")
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        break
    else:
        raise Held(f"{path}: could not take the lock (others keep taking it); nothing was done")

    stop = threading.Event()

    def renew():
        while not stop.wait(lease * RENEW_EVERY):
            current = _read(path)
            if not current or current.get("token") != record["token"]:
                return                        # our lease ran out and it was taken over
            record["lease_until"] = _stamp(_now() + datetime.timedelta(seconds=lease))
            _write(path, record)

    renewer = threading.Thread(target=renew, name=f"lease {path}", daemon=True)
    renewer.start()
    try:
        yield record
    finally:
        stop.set()
        renewer.join()
        current = _read(path)
        if current and current.get("token") == record["token"]:
            path.unlink()
        else:
            log.warning(f"warning: {path} was taken over while this command held it "
                  f"(now {_describe(current) if current else 'nobody'}): its lease ran out "
                  "(was this process stopped?)")
