"""Benchmark corpora: real subsets and deterministic enlargements of them.

The 3,741 real SKILL.md files in ../shared/corpora are the source.  Subsets
(300, 1,000) are an even stride over the sorted skills, so every collection
is represented; 20,000 and 100,000 are renamed copies (``copyNNN/...``, leaf
folder and frontmatter name suffixed ``-cNNN``) so that every copy is a
distinct skill rather than a shadowed duplicate, and perturbed (``perturb``)
so that no two copies share their text.  Everything is written
under the ignored cache folder, keyed by CORPUS_VERSION, and reused when a
completed marker is present: this is benchmark data, never committed.
"""

import os
import shutil
import sys

CORPUS_VERSION = "v2"  # v2: copies are perturbed (see perturb)
SHARED = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "..", "..", "shared", "corpora"))


def collections(src=SHARED):
    """The collection folders of the shared corpora, sorted (the 16 roots)."""
    return [os.path.join(src, d) for d in sorted(os.listdir(src))
            if os.path.isdir(os.path.join(src, d))]


def real_skills(src=SHARED):
    """Every real skill as ``(rel_dir, text)``, sorted by path, keeping the
    first skill of each name (what a build of all 16 roots indexes; later
    duplicates would only be shadowed and shrink the corpus).

    ``rel_dir`` is ``collection/path/to/skill``; ``text`` the file decoded
    with surrogateescape so writing it back is byte-exact.
    """
    from retriever import discover, frontmatter
    out = []
    names = set()
    for root in collections(src):
        coll = os.path.basename(root)
        for skill_dir, md in discover.walk_skill_files(root):
            with open(md, "rb") as f:
                text = f.read().decode("utf-8", "surrogateescape")
            folder = os.path.basename(skill_dir)
            rec, _ = frontmatter.parse_skill(text.encode("utf-8", "surrogateescape")
                                             .decode("utf-8", "replace"), folder)
            if rec["name"] in names:
                continue
            names.add(rec["name"])
            rel = os.path.relpath(skill_dir, root)
            out.append((coll if rel == "." else coll + "/" + rel, text))
    out.sort(key=lambda x: x[0])
    return out


def stride(items, n):
    """``n`` items spread evenly over ``items`` (deterministic)."""
    if n >= len(items):
        return list(items)
    return [items[i * len(items) // n] for i in range(n)]


def suffix_name(text, suffix):
    """``text`` with the first top-level ``name:`` line of its frontmatter
    given ``suffix``; returns ``(text, changed)``.  Files without such a line
    take their name from the (already suffixed) folder."""
    lines = text.split("\n")
    start = 0
    while start < len(lines) and lines[start].strip("\ufeff\r ") == "":
        start += 1
    if start >= len(lines) or lines[start].strip("\ufeff\r ") != "---":
        return text, False
    for i in range(start + 1, len(lines)):
        line = lines[i]
        bare = line.rstrip("\r")
        if bare.rstrip() in ("---", "..."):
            break
        if bare.startswith("name:"):
            value = bare[5:].strip()
            cr = "\r" if line.endswith("\r") else ""
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                new = value[:-1] + suffix + value[-1]
            elif value and value[0] not in "|>&*!%@`{[":
                cut = value.find(" #")
                new = (value if cut < 0 else value[:cut].rstrip()) + suffix
            else:
                return text, False
            lines[i] = "name: " + new + cr
            return "\n".join(lines), True
    return text, False


PERTURBATION = ("every copy's body loses a seeded ~1 in 12 of its non-blank lines and repeats one "
                "seeded word of another line, so each of the copies has its own text, field lengths "
                "and term counts (the vocabulary stays real)")


def perturb(text, seed):
    """``text`` with its body perturbed as PERTURBATION says (deterministic
    in ``seed``); the frontmatter is left alone."""
    import random
    rnd = random.Random(seed)
    lines = text.split("\n")
    first = 0
    while first < len(lines) and lines[first].strip("\ufeff\r ") == "":
        first += 1
    start = 0
    if first < len(lines) and lines[first].strip("\ufeff\r ") == "---":
        for i in range(first + 1, len(lines)):
            if lines[i].rstrip("\r").rstrip() in ("---", "..."):
                start = i + 1
                break
    body = [i for i in range(start, len(lines)) if lines[i].strip()]
    drop = set(i for i in body if rnd.random() < 1 / 12.0)
    keep = [i for i in body if i not in drop]
    if keep:
        i = rnd.choice(keep)
        words = lines[i].split(" ")
        j = rnd.randrange(len(words))
        lines[i] = " ".join(words[:j + 1] + [words[j]] + words[j + 1:])
    return "\n".join(l for i, l in enumerate(lines) if i not in drop)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(text.encode("utf-8", "surrogateescape"))


def _ready(folder):
    return os.path.exists(os.path.join(folder, ".complete"))


def _finish(folder, count):
    with open(os.path.join(folder, ".complete"), "w") as f:
        f.write("%d\n" % count)


def subset(cache, n, skills, log=print):
    """A folder holding ``n`` real skills (stride over ``skills``); reused
    when already complete.  Returns the folder."""
    folder = os.path.join(cache, "corpus-%s" % CORPUS_VERSION, "real-%d" % n)
    if _ready(folder):
        return folder
    log("writing %d-skill subset to %s" % (n, folder))
    shutil.rmtree(folder, ignore_errors=True)
    chosen = stride(skills, n)
    for rel, text in chosen:
        _write(os.path.join(folder, rel, "SKILL.md"), text)
    _finish(folder, len(chosen))
    return folder


def copies(cache, n, skills, log=print):
    """A folder holding ``n`` skills made from renamed, perturbed copies of
    ``skills``: ``copyNNN/<rel_dir>-cNNN/SKILL.md`` with the frontmatter name
    suffixed ``-cNNN`` and the body perturbed.  Reused when already complete.
    Returns the folder."""
    folder = os.path.join(cache, "corpus-%s" % CORPUS_VERSION, "copies-%d" % n)
    if _ready(folder):
        return folder
    log("writing %d-skill copied corpus to %s (one-off, cached)" % (n, folder))
    shutil.rmtree(folder, ignore_errors=True)
    count = 0
    c = 0
    while count < n:
        suffix = "-c%03d" % c
        for rel, text in skills:
            if count >= n:
                break
            new, _ = suffix_name(text, suffix)
            new = perturb(new, "%s%s" % (rel, suffix))
            _write(os.path.join(folder, "copy%03d" % c, rel + suffix, "SKILL.md"), new)
            count += 1
        c += 1
        if c % 5 == 0 or count >= n:
            log("  %d / %d" % (count, n))
    _finish(folder, count)
    return folder


def real_tree(cache, log=print):
    """A writable copy of the 16 shared collections (the 3,741 files, as
    they are), for timing rebuilds after edits.  Returns its roots."""
    folder = os.path.join(cache, "corpus-%s" % CORPUS_VERSION, "real-all")
    if not _ready(folder):
        log("copying the shared corpora to %s" % folder)
        shutil.rmtree(folder, ignore_errors=True)
        for root in collections():
            shutil.copytree(root, os.path.join(folder, os.path.basename(root)), symlinks=True)
        _finish(folder, len(collections()))
    return [os.path.join(folder, d) for d in sorted(os.listdir(folder))
            if os.path.isdir(os.path.join(folder, d))]


def main(argv=None):
    """Write the corpora (``python bench/corpus.py CACHE_DIR``)."""
    argv = sys.argv[1:] if argv is None else argv
    cache = argv[0] if argv else os.path.join(os.path.dirname(__file__), "..", ".cache", "bench")
    skills = real_skills()
    print("%d distinct real skills" % len(skills))
    for n in (300, 1000):
        print(subset(cache, n, skills))
    for n in (20000, 100000):
        print(copies(cache, n, skills))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
