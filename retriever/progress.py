"""Progress of a long build on a terminal: files read, skills indexed, time.

Shown only where someone watches: stderr is a terminal, the build was not
asked to be quiet, and it has run for more than ``AFTER_SECONDS``.  Hooks,
pipes, ``-q`` and background rebuilds get no reporter at all.
"""

import sys
import time

AFTER_SECONDS = 1.0  # a shorter build ends before a line would help
_EVERY_SECONDS = 0.1  # redraws at most this often


def reporter(stream=None, quiet=False):
    """A ``progress(files_read, skills_indexed)`` callback for
    ``build.build`` writing to ``stream`` (stderr), or None when the build
    must stay quiet.  Call ``progress.done()`` when the build ends (it ends
    the line if one was drawn) and ``progress.clear()`` before printing
    anything else to the stream."""
    stream = sys.stderr if stream is None else stream
    if quiet:
        return None
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError, OSError):
        return None
    t0 = time.monotonic()
    state = {"next": t0 + AFTER_SECONDS, "shown": False, "last": (0, 0)}

    def progress(files_read, skills_indexed, force=False):
        state["last"] = (files_read, skills_indexed)
        now = time.monotonic()
        if now < state["next"] and not force:
            return
        state["next"] = now + _EVERY_SECONDS
        state["shown"] = True
        try:
            stream.write("\rskill-retrieve: building index: {:,} files read, {:,} skills indexed, {:.1f} s\x1b[K"
                         .format(files_read, skills_indexed, now - t0))
            stream.flush()
        except (OSError, ValueError):
            pass

    def done():
        if state["shown"]:
            progress(*state["last"], force=True)
            try:
                stream.write("\n")
                stream.flush()
            except (OSError, ValueError):
                pass

    def clear():
        # A warning is about to be printed: take the line away first (the
        # next update draws it again below the warning).
        if state["shown"]:
            try:
                stream.write("\r\x1b[K")
            except (OSError, ValueError):
                pass

    progress.done = done
    progress.clear = clear
    return progress


def warner(progress, warn):
    """``warn`` that first clears ``progress``'s line (``warn`` itself when
    there is no reporter)."""
    if progress is None:
        return warn

    def warn_clear(line):
        progress.clear()
        warn(line)
    return warn_clear
